/**
 * The cluster's trainer and the learner alone timed in turns, within one job: the learner alone
 * trains in this process while the trainer's process is held (`SIGSTOP`), then the trainer is let
 * go (`SIGCONT`) and timed off its samples counter while the learner waits, slice after slice,
 * the pairs taking turns going first. Neither runs while the other is timed; the held trainer's
 * job waits for it (its leases and quorum allow seconds of silence). The machine's speed moves
 * within seconds by more than what `overhead` compares (a busy loop here went from 62 to 89
 * rounds a second within 10 s, with no steal time), so each slice is held against the one beside
 * it. Timed against itself, the example's learner stepping in a second process in place of the
 * trainer, nine runs read 0.926–1.160 this way (mean 0.991, standard deviation 0.072), where its
 * 20 s window against the faster of the learners timed 8 s before and after read 0.713–1.280
 * (mean 0.955, standard deviation 0.166).
 */
import type { MemberStatus } from '#libs/messaging';
import { sleep } from '#libs/retry';
import { trainerSamples } from '../cluster/bench-cluster.js';
import { timeSteps, type SteppingLearner } from '../learner/train-step.js';
import { pairedTurns } from '../paired-turns.js';

/** Pairs of slices, and how long each slice is timed. */
export const SLICE_PAIRS = 16;
export const SLICE_SECONDS = 1;
/**
 * How long the trainer trains after it is let go before its slice is timed: timers that fell due
 * while it was held (its status, its quorum heartbeat) run then, not in the slice.
 */
const RESUME_MS = 200;

/** What the paired slices measured: samples/s of each side, slice by slice, and their ratios. */
export interface PairedSlices {
  trainer: number[];
  alone: number[];
  /** Each pair's trainer slice over its learner-alone slice. */
  ratios: number[];
  /** The median of `ratios`. */
  ratio: number;
}

/**
 * Times `trainer` (a local cluster's, on this machine) against `alone` in {@link SLICE_PAIRS}
 * pairs of slices; `alone` warms up `warmUpSeconds` first, with the trainer held. The trainer is
 * let go whatever happens.
 */
export async function pairedSlices(
  trainer: MemberStatus,
  alone: SteppingLearner,
  options: {
    batchSize: number;
    warmUpSeconds: number;
    pairs?: number;
    sliceSeconds?: number;
    say: (line: string) => void;
  },
): Promise<PairedSlices> {
  const { pairs = SLICE_PAIRS, sliceSeconds = SLICE_SECONDS } = options;
  const held = async <T>(work: () => Promise<T>): Promise<T> => {
    process.kill(trainer.pid, 'SIGSTOP');
    try {
      return await work();
    } finally {
      process.kill(trainer.pid, 'SIGCONT');
    }
  };
  const aloneSlice = (): Promise<number> =>
    held(async () => {
      const { steps, elapsed } = await timeSteps(alone.step, sliceSeconds);
      return (steps * options.batchSize) / elapsed;
    });
  const trainerSlice = async (): Promise<number> => {
    await sleep(RESUME_MS);
    const start = await countedAt(trainer);
    await sleep(sliceSeconds * 1000);
    const end = await countedAt(trainer);
    return (end.samples - start.samples) / ((end.at - start.at) / 1000);
  };
  await held(() => alone.warmUp(options.warmUpSeconds));
  const turns = await pairedTurns(pairs, { ours: trainerSlice, baseline: aloneSlice }, (pair, trained, learned) =>
    options.say(
      `paired slices, pair ${pair + 1} of ${pairs}: trainer ${Math.round(trained)}, ` +
        `learner alone ${Math.round(learned)} samples/s (${(trained / learned).toFixed(3)})`,
    ),
  );
  return { trainer: turns.ours, alone: turns.baseline, ratios: turns.ratios, ratio: turns.ratio };
}

/**
 * The trainer's samples counter, and when it was read: the middle of the request, which the
 * trainer answers between two of its steps.
 */
async function countedAt(trainer: MemberStatus): Promise<{ samples: number; at: number }> {
  const sent = performance.now();
  const samples = await trainerSamples(trainer);
  return { samples, at: (sent + performance.now()) / 2 };
}
