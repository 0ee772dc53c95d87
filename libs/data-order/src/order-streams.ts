import { permutation } from './permutation.js';
import { SeededRandom } from './seeded-random.js';

const GOLDEN_RATIO_32 = 0x9e3779b9;

/** Kinds of ordering, mixed into their streams' seeds so they never share a sequence. */
const TASK_ORDER_STREAM = 1;
const RECORD_ORDER_STREAM = 2;

/** The 32-bit finaliser of MurmurHash3: every input bit moves about half of the output bits. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The seed of one stream of random numbers, hashed from a job seed and the words that name the
 * stream. The job seed counts with its low and high 32 bits (two's complement), so every integer
 * up to 2^53 in magnitude names its own streams; each word counts modulo 2^32.
 */
export function streamSeed(jobSeed: number, words: readonly number[]): number {
  const low = jobSeed >>> 0;
  const high = Math.floor(jobSeed / 2 ** 32) >>> 0;
  let h = 0;
  for (const word of [low, high, ...words]) h = fmix32(((h ^ (word >>> 0)) + GOLDEN_RATIO_32) >>> 0);
  return h;
}

/**
 * The order in which an epoch hands out its tasks: a Fisher–Yates permutation of the task ids
 * `0 .. taskCount-1` drawn from the stream of (`seed`, task order, `epoch`). The same seed and
 * epoch always give the same order; each epoch draws its own.
 */
export function epochTaskOrder(taskCount: number, seed: number, epoch: number): number[] {
  return permutation(taskCount, new SeededRandom(streamSeed(seed, [TASK_ORDER_STREAM, epoch])));
}

/**
 * The generator that orders the records of one task in one epoch: the stream of (`seed`,
 * record order, `epoch`, `taskId`). Whichever trainer reads the task, and however often, it
 * draws the same numbers.
 */
export function taskRecordRandom(seed: number, epoch: number, taskId: number): SeededRandom {
  return new SeededRandom(streamSeed(seed, [RECORD_ORDER_STREAM, epoch, taskId]));
}
