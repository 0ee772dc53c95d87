import { MissingSeedError } from '#libs/data-order';
import type { JobSpec } from '#libs/job-spec';
import { minimalJobSpec } from '../../../test/support/minimal-job-spec.js';
import { queueOptions } from './job-driver.js';
import { withJobSeed } from './job-seed.js';

function spec(training: Record<string, unknown>): JobSpec {
  return minimalJobSpec('seeded', { training });
}

describe('job seed', () => {
  test('job seed - a given seed is kept, a missing one is picked and the submitted spec left alone', () => {
    const given = spec({ seed: 17 });
    expect(withJobSeed(given, () => 5)).toBe(given);
    const bare = spec({});
    const seeded = withJobSeed(bare, () => 5);
    expect(seeded.training.seed).toBe(5);
    expect(seeded.training).toEqual({ ...bare.training, seed: 5 });
    expect(bare.training.seed).toBeUndefined();
    const picked = withJobSeed(bare).training.seed!;
    expect(Number.isInteger(picked) && picked >= 0).toBe(true);
  });

  test('job seed - the queue shuffles with the job seed unless shuffle is false', () => {
    expect(queueOptions(spec({ seed: 3 }), { durationWindow: 20 }).shuffleSeed).toBe(3);
    expect(queueOptions(spec({ seed: 3, shuffle: false }), { durationWindow: 20 })).not.toHaveProperty('shuffleSeed');
    expect(() => queueOptions(spec({}), { durationWindow: 20 })).toThrow(MissingSeedError);
  });
});
