import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { allowedCpus } from '#libs/config';

/** Whether `tributary up` pins each trainer to a core of its own (`--pin-trainers`). */
export type PinChoice = 'auto' | 'on' | 'off';

export const PIN_CHOICES: readonly PinChoice[] = ['auto', 'on', 'off'];

/** Thrown when `--pin-trainers on` cannot be honoured, naming why. */
export class TrainerPinningError extends Error {
  override readonly name = 'TrainerPinningError';
}

/** The path of `command` on `PATH`, if it is an executable there. */
export function onPath(command: string, path = process.env['PATH'] ?? ''): string | undefined {
  for (const dir of path.split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** What pinning takes of this machine: the CPUs this process may use, and `taskset`'s path. */
export interface PinningHost {
  cpus: number[] | { unknown: string };
  taskset: string | undefined;
}

/** The core each trainer runs on (undefined: any), and a line that says so or why not. */
export interface TrainerCores {
  cores: (number | undefined)[];
  /** `taskset`, which starts a trainer on its core; set when any is pinned. */
  taskset?: string;
  line: string;
}

/**
 * Which core each of `trainers` trainers of a local cluster runs on. Each trainer's learner
 * keeps its model, optimizer state and minibatch (about 2 MiB for the example MLP, an L2 cache's
 * worth) hot in its core's caches; left to the scheduler, trainers move between cores as the
 * parameter servers, the master and the evaluator wake, and find them cold. `auto` pins trainer
 * i to the i-th CPU this process may use when there is one for each and more than one in all
 * (everything else still runs anywhere); `on` pins them round-robin however many there are;
 * `off` leaves them to the scheduler. Pinning takes `taskset` (util-linux) and Linux's CPU list;
 * the supervisor holds a trainer's main thread alone to its core (`pinMainThread`).
 *
 * @throws TrainerPinningError for `on` when neither is there.
 */
export function trainerCores(
  choice: PinChoice,
  trainers: number,
  host: PinningHost = { cpus: allowedCpus(), taskset: onPath('taskset') },
): TrainerCores {
  const { cpus, taskset } = host;
  const floating = (why: string): TrainerCores => ({
    cores: Array.from({ length: trainers }, () => undefined),
    line: `trainers not pinned to cores: ${why}`,
  });
  if (choice === 'off') return floating('--pin-trainers off');
  if (!Array.isArray(cpus) || taskset === undefined) {
    const why = !Array.isArray(cpus) ? cpus.unknown : 'no taskset on PATH';
    if (choice === 'on') throw new TrainerPinningError(`--pin-trainers on: ${why}`);
    return floating(why);
  }
  if (choice === 'auto' && (cpus.length < 2 || trainers > cpus.length)) {
    return floating(
      `${trainers} trainer${trainers === 1 ? '' : 's'} on ${cpus.length} core${cpus.length === 1 ? '' : 's'}`,
    );
  }
  const cores = Array.from({ length: trainers }, (_, i) => cpus[i % cpus.length]!);
  return {
    cores,
    taskset,
    line: `trainers pinned to cores ${cores.join(', ')} (--pin-trainers off lets them move)`,
  };
}
