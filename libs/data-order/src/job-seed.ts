import { randomInt } from 'node:crypto';

/** Seeds picked for jobs that gave none lie in [0, MAX_PICKED_SEED]: positive 31-bit integers. */
export const MAX_PICKED_SEED = 2 ** 31 - 1;

/** A fresh seed for a job that gave none, uniform in [0, {@link MAX_PICKED_SEED}]. */
export function pickJobSeed(): number {
  return randomInt(0, MAX_PICKED_SEED + 1);
}
