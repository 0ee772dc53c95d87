import { InvalidJobSpecError, validateJobSpec, type JobSpec } from '#libs/job-spec';
import { minimalJobSpec } from '../../../test/support/minimal-job-spec.js';
import { DEFAULT_PARTITION_MIN_ELEMENTS, withPartition } from './job-partition.js';

function spec(pservers: Record<string, unknown>): JobSpec {
  return minimalJobSpec('cut', { pservers });
}

describe('job partition', () => {
  test('job partition - a given rule is kept, a missing one gets the default and the submitted spec is left alone', () => {
    const given = spec({ count: 2, partition: { minElements: 0 } });
    expect(withPartition(given)).toBe(given);
    const bare = spec({ count: 2 });
    expect(bare.pservers.partition).toBeUndefined();
    expect(withPartition(bare).pservers).toEqual({
      count: 2,
      partition: { minElements: DEFAULT_PARTITION_MIN_ELEMENTS },
    });
    expect(bare.pservers.partition).toBeUndefined();
  });

  test('job partition - a stored spec without the rule stays without it when read again', () => {
    const stored = JSON.parse(JSON.stringify(spec({ count: 2 }))) as unknown;
    expect(validateJobSpec(stored).pservers.partition).toBeUndefined();
  });

  test('job partition - a bad rule is refused, naming the field', () => {
    for (const partition of [{ minElements: -1 }, { minElements: 1.5 }, {}, { minElements: 8, rows: 2 }]) {
      expect(() => spec({ count: 2, partition })).toThrow(InvalidJobSpecError);
    }
    expect(() => spec({ count: 2, partition: { minElements: -1 } })).toThrow(/pservers\.partition\.minElements/);
  });
});
