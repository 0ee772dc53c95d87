/**
 * One learner training alone, as a process of its own (the `scaling` ceiling runs one or two at
 * once): prints its samples/s as JSON, `{"samplesPerSecond": N}`.
 *   node dist/bench/scaling/learner-process.js SECONDS
 */
import { learnerAloneSamplesPerSecond } from '../overhead/overhead.js';

const seconds = Number(process.argv[2] ?? '10');
if (!Number.isFinite(seconds) || seconds <= 0)
  throw new Error(`seconds must be a positive number (got ${process.argv[2]})`);
console.log(JSON.stringify({ samplesPerSecond: await learnerAloneSamplesPerSecond(seconds) }));
