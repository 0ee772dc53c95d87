/**
 * `#libs/data-order`: the seeded order of a job's data. {@link SeededRandom} is the one
 * generator (mulberry32); {@link epochTaskOrder} permutes an epoch's tasks and
 * {@link taskRecordRandom} drives the shuffle of one task's records, both from the job seed;
 * {@link shuffleSettings} reads a spec's data-order fields and {@link pickJobSeed} draws a seed
 * for a job that gave none.
 */
export { MissingSeedError } from './errors.js';
export { SeededRandom } from './seeded-random.js';
export { permutation, shuffleInPlace } from './permutation.js';
export { epochTaskOrder, streamSeed, taskRecordRandom } from './order-streams.js';
export { shuffleSettings } from './shuffle-settings.js';
export { MAX_PICKED_SEED, pickJobSeed } from './job-seed.js';

export type { DataOrderFields, ShuffleSettings } from './shuffle-settings.js';
