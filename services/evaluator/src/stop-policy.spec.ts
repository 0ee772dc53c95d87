import fc from 'fast-check';
import type { JobSpec } from '#libs/job-spec';
import {
  StopPolicy,
  isImprovement,
  meetsTarget,
  replayStopPolicy,
  type ScoredSnapshot,
  type StopMetric,
} from './stop-policy.js';

/** Evaluations at versions 1, 2, ..., with the given values. */
function scored(values: readonly number[]): ScoredSnapshot[] {
  return values.map((value, i) => ({ version: i + 1, value }));
}

const metricArb = fc.constantFrom<StopMetric>('accuracy', 'loss');
const valueArb = fc.double({ min: 0, max: 10, noNaN: true });

describe('stop policy', () => {
  it('stop policy - accuracy target is reached at >= and loss target at <=', () => {
    expect(replayStopPolicy({ target: 0.8 }, 'accuracy', scored([0.5, 0.79, 0.8, 0.9]))).toMatchObject({
      stop: true,
      reason: 'target',
      at: 2,
    });
    expect(replayStopPolicy({ target: 0.3 }, 'loss', scored([0.9, 0.31, 0.3]))).toMatchObject({
      stop: true,
      reason: 'target',
      at: 2,
    });
    expect(replayStopPolicy({ target: 0.3 }, 'loss', scored([0.9, 0.5, 0.31]))).toMatchObject({ stop: false });
  });

  it('stop policy - patience counts evaluations in a row without a new best', () => {
    // accuracy: 0.5 best, 0.6 best, 0.6 (no), 0.55 (no) -> patience 2 stops at index 3
    const decision = replayStopPolicy({ patience: 2 }, 'accuracy', scored([0.5, 0.6, 0.6, 0.55, 0.9]));
    expect(decision).toMatchObject({ stop: true, reason: 'patience', at: 3, best: { value: 0.6, version: 2 } });
    // an improvement resets the count
    expect(replayStopPolicy({ patience: 2 }, 'loss', scored([1, 1.1, 0.9, 1, 0.95]))).toMatchObject({
      stop: true,
      at: 4,
    });
  });

  it('stop policy - epoch and time budgets are left to the master: with only them it keeps evaluating', () => {
    const budgetsOnly: JobSpec['stop'] = { maxEpochs: 1, maxSeconds: 1 };
    const policy = new StopPolicy(budgetsOnly, 'loss');
    const decisions = scored([1, 0.5, 0.7, 0.7, 0.2]).map((e) => policy.observe(e));
    expect(decisions.map((d) => d.stop)).toEqual([false, false, false, false, false]);
    expect(policy.evaluations).toBe(5);
    expect(policy.best).toEqual({ value: 0.2, version: 5 });
  });

  it('stop policy - with budgets beside a target, it stops on the target alone', () => {
    const conditions: JobSpec['stop'] = { target: 0.1, maxEpochs: 1, maxSeconds: 1 };
    const policy = new StopPolicy(conditions, 'loss');
    expect(policy.observe({ version: 5, value: 1 })).toEqual({ stop: false, improved: true });
    expect(policy.observe({ version: 6, value: 0.1 })).toMatchObject({ stop: true, reason: 'target', improved: true });
  });

  it('stop policy - the first decision sticks and the best keeps being tracked', () => {
    const policy = new StopPolicy({ target: 0.5 }, 'accuracy');
    const first = policy.observe({ version: 1, value: 0.6 });
    const later = policy.observe({ version: 2, value: 0.9 });
    expect(later).toMatchObject({ stop: true, reason: 'target', detail: first.stop ? first.detail : '' });
    expect(policy.best).toEqual({ value: 0.9, version: 2 });
    expect(policy.decision).toMatchObject({ reason: 'target' });
  });

  it('stop policy - NaN never improves nor meets a target', () => {
    expect(isImprovement('loss', Number.NaN, 1)).toBe(false);
    expect(isImprovement('loss', 1, Number.NaN)).toBe(true);
    expect(meetsTarget('loss', Number.NaN, 1)).toBe(false);
    const decision = replayStopPolicy({ target: 1, patience: 2 }, 'loss', scored([Number.NaN, Number.NaN]));
    expect(decision).toMatchObject({ stop: true, reason: 'patience', best: undefined });
  });

  it('stop policy - with only a target, it stops exactly at the first evaluation meeting it', () => {
    fc.assert(
      fc.property(metricArb, valueArb, fc.array(valueArb, { maxLength: 40 }), (metric, target, values) => {
        const decision = replayStopPolicy({ target }, metric, scored(values));
        const first = values.findIndex((v) => (metric === 'accuracy' ? v >= target : v <= target));
        if (first < 0) expect(decision.stop).toBe(false);
        else expect(decision).toMatchObject({ stop: true, reason: 'target', at: first });
      }),
    );
  });

  it('stop policy - with only patience, it stops at the first run of that many non-improvements', () => {
    fc.assert(
      fc.property(
        metricArb,
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.integer({ min: 0, max: 6 }), { maxLength: 40 }),
        (metric, patience, values) => {
          const decision = replayStopPolicy({ patience }, metric, scored(values));
          let best: number | undefined;
          let run = 0;
          let expected = -1;
          for (let i = 0; i < values.length; i++) {
            const v = values[i]!;
            const better = best === undefined || (metric === 'accuracy' ? v > best : v < best);
            if (better) {
              best = v;
              run = 0;
            } else {
              run += 1;
            }
            if (run >= patience) {
              expected = i;
              break;
            }
          }
          if (expected < 0) expect(decision.stop).toBe(false);
          else expect(decision).toMatchObject({ stop: true, reason: 'patience', at: expected });
        },
      ),
    );
  });

  it('stop policy - the best is the extreme value, at its first version', () => {
    fc.assert(
      fc.property(metricArb, fc.array(valueArb, { minLength: 1, maxLength: 40 }), (metric, values) => {
        const policy = new StopPolicy({}, metric);
        for (const evaluation of scored(values)) expect(policy.observe(evaluation).stop).toBe(false);
        const extreme = metric === 'accuracy' ? Math.max(...values) : Math.min(...values);
        expect(policy.best).toEqual({ value: extreme, version: values.indexOf(extreme) + 1 });
      }),
    );
  });

  it('stop policy - budgets alone never stop, whatever the evaluations', () => {
    fc.assert(
      fc.property(
        metricArb,
        fc.integer({ min: 1, max: 50 }),
        fc.double({ min: 1, max: 1000, noNaN: true }),
        fc.array(valueArb, { maxLength: 40 }),
        (metric, maxEpochs, maxSeconds, values) => {
          const budgets: JobSpec['stop'] = { maxEpochs, maxSeconds };
          expect(replayStopPolicy(budgets, metric, scored(values)).stop).toBe(false);
        },
      ),
    );
  });

  it('stop policy - a policy restored from the state of another decides as that one would have', () => {
    fc.assert(
      fc.property(
        metricArb,
        fc.array(valueArb, { minLength: 2, maxLength: 30 }),
        fc.integer({ min: 1, max: 5 }),
        fc.nat(),
        (metric, values, patience, cut) => {
          const evaluations = scored(values);
          const split = 1 + (cut % (evaluations.length - 1));
          const whole = replayStopPolicy({ patience }, metric, evaluations);
          const before = new StopPolicy({ patience }, metric);
          let decided = before.decision;
          for (const e of evaluations.slice(0, split)) if (!decided.stop) decided = before.observe(e);
          if (decided.stop) return;
          const after = new StopPolicy({ patience }, metric);
          after.restore(JSON.parse(JSON.stringify(before.state())));
          for (const e of evaluations.slice(split)) if (!decided.stop) decided = after.observe(e);
          expect(decided).toEqual(
            whole.stop
              ? { stop: true, reason: whole.reason, detail: whole.detail, improved: expect.any(Boolean) }
              : { stop: false, improved: expect.any(Boolean) },
          );
        },
      ),
    );
  });
});
