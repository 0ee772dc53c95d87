import type { Command } from 'commander';

/**
 * Returns the subcommand `name` of `parent`, creating it with `description` when it does not
 * exist yet, so several command files can add to one group (`recordio inspect`, `recordio cat`).
 */
export function commandGroup(parent: Command, name: string, description: string): Command {
  const existing = parent.commands.find((c) => c.name() === name);
  return existing ?? parent.command(name).description(description);
}
