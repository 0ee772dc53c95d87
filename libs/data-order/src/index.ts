/**
 * `#libs/data-order`: the seeded order of a job's data. {@link SeededRandom} is the one
 * generator (mulberry32); {@link epochTaskOrder} permutes an epoch's tasks and
 * {@link taskRecordRandom} drives the shuffle of one task's records, both from the job seed;
 * {@link pickJobSeed} draws a seed for a job that gave none.
 */
export { SeededRandom } from './seeded-random.js';
export { permutation, shuffleInPlace } from './permutation.js';
export { epochTaskOrder, streamSeed, taskRecordRandom } from './order-streams.js';
export { MAX_PICKED_SEED, pickJobSeed } from './job-seed.js';
