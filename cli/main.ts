import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError } from 'commander';
import { type CliIo, CommandExit, processIo } from './cli-io.js';
import { COMMANDS } from './commands/index.js';

/** Builds the `tributary` program with every command, writing through `io`. */
export function buildProgram(io: CliIo): Command {
  const program = new Command('tributary')
    .description('Elastic, fault-tolerant, data-parallel training of TensorFlow.js models')
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .exitOverride()
    .showHelpAfterError();
  for (const command of COMMANDS) command.register(program, io);
  return program;
}

/** Writes an error as `tributary: <message>`, with its stack and causes when `TRIBUTARY_DEBUG=1`. */
function reportError(io: CliIo, err: unknown): void {
  const message = err instanceof Error ? err.message : String(err);
  io.stderr.write(`tributary: ${message}\n`);
  if (io.env.TRIBUTARY_DEBUG === '1') {
    for (let e: unknown = err; e !== undefined; e = e instanceof Error ? e.cause : undefined) {
      io.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      if (e instanceof Error && e.cause !== undefined) io.stderr.write('caused by: ');
    }
  }
}

/**
 * Runs `tributary` with the given arguments (without `node` and the script) and returns the
 * exit code: 0 on success, 1 on an error (printed as `tributary: <message>`), commander's code
 * for a usage error (after printing the usage).
 */
export async function main(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode;
    if (err instanceof CommandExit) return err.exitCode;
    reportError(io, err);
    return 1;
  }
}

/** The `tributary` launcher, which imports this module from `dist/cli/main.js`. */
const LAUNCHER_URL = new URL('../../bin/tributary.js', import.meta.url).href;

/** True when node was started with this module or with the `tributary` launcher (not when imported otherwise). */
function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    const started = pathToFileURL(realpathSync(script)).href;
    return started === import.meta.url || started === LAUNCHER_URL;
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  // A reader that goes away (`| head`) is not an error; commands stop writing when they notice.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
  process.exitCode = await main(process.argv.slice(2));
}
