import fc from 'fast-check';
import {
  CONSTANT_SCHEDULE,
  InvalidHyperparameterError,
  resolveLearningRateSchedule,
  scheduledLearningRate,
  type LearningRateSchedule,
} from './index.js';

const rates = (schedule: LearningRateSchedule, versions: number[], base = 0.1) =>
  versions.map((v) => scheduledLearningRate(base, schedule, v));

describe('learning rate schedule', () => {
  it('learning rate schedule - constant keeps the base rate', () => {
    expect(rates(CONSTANT_SCHEDULE, [0, 1, 1000])).toEqual([0.1, 0.1, 0.1]);
  });

  it('learning rate schedule - step multiplies by factor after every `every` steps', () => {
    const schedule = resolveLearningRateSchedule({ type: 'step', every: 3, factor: 0.5 }, 0.1);
    expect(rates(schedule, [0, 2, 3, 5, 6, 9])).toEqual([0.1, 0.1, 0.05, 0.05, 0.025, 0.0125]);
    expect(resolveLearningRateSchedule({ type: 'step', every: 10 }, 0.1)).toMatchObject({ factor: 0.1 });
  });

  it('learning rate schedule - exponential decays by decayRate per decaySteps, smoothly or in stairs', () => {
    const smooth = resolveLearningRateSchedule({ type: 'exponential', decayRate: 0.5, decaySteps: 4 }, 1);
    expect(rates(smooth, [0, 2, 4, 8], 1)).toEqual([1, Math.SQRT1_2, 0.5, 0.25].map((r) => expect.closeTo(r, 12)));
    const stairs = resolveLearningRateSchedule(
      { type: 'exponential', decayRate: 0.5, decaySteps: 4, staircase: true },
      1,
    );
    expect(rates(stairs, [0, 3, 4, 7, 8], 1)).toEqual([1, 1, 0.5, 0.5, 0.25]);
  });

  it('learning rate schedule - cosine falls from the base rate to minLearningRate over steps, then stays', () => {
    const schedule = resolveLearningRateSchedule({ type: 'cosine', steps: 10, minLearningRate: 0.01 }, 0.11);
    const [start, middle, end, after] = rates(schedule, [0, 5, 10, 50], 0.11);
    expect(start).toBeCloseTo(0.11, 12);
    expect(middle).toBeCloseTo(0.06, 12);
    expect(end).toBeCloseTo(0.01, 12);
    expect(after).toBeCloseTo(0.01, 12);
    expect(resolveLearningRateSchedule({ type: 'cosine', steps: 10 }, 0.1)).toMatchObject({ minLearningRate: 0 });
  });

  it('learning rate schedule - warm-up rises linearly to the first rate, then the schedule starts', () => {
    const schedule = resolveLearningRateSchedule({ type: 'step', every: 2, factor: 0.5, warmupSteps: 4 }, 0.4);
    const expected = [0.1, 0.2, 0.3, 0.4, 0.4, 0.4, 0.2];
    expect(rates(schedule, [0, 1, 2, 3, 4, 5, 6], 0.4)).toEqual(expected.map((r) => expect.closeTo(r, 12)));
  });

  it('learning rate schedule - every schedule stays finite, at least 0, and never exceeds the base rate', () => {
    const schedule = fc.oneof(
      fc.record({ type: fc.constant('constant') }),
      fc.record({
        type: fc.constant('step'),
        every: fc.integer({ min: 1, max: 50 }),
        factor: fc.double({ min: 0.01, max: 1, noNaN: true }),
      }),
      fc.record({
        type: fc.constant('exponential'),
        decayRate: fc.double({ min: 0.5, max: 1, noNaN: true }),
        decaySteps: fc.integer({ min: 1, max: 50 }),
        staircase: fc.boolean(),
      }),
      fc.record({
        type: fc.constant('cosine'),
        steps: fc.integer({ min: 1, max: 100 }),
        minLearningRate: fc.constant(0.001),
      }),
    );
    fc.assert(
      fc.property(
        schedule,
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 0, max: 200 }),
        (given, warmupSteps, version) => {
          const resolved = resolveLearningRateSchedule({ ...given, warmupSteps }, 0.1);
          const rate = scheduledLearningRate(0.1, resolved, version);
          // A steep step decay may underflow to 0 after enough steps (0.1 x 0.01^162), which the
          // kernels take as no step; it never turns negative or NaN.
          expect(Number.isFinite(rate)).toBe(true);
          expect(rate).toBeGreaterThanOrEqual(0);
          expect(rate).toBeLessThanOrEqual(0.1 + 1e-15);
        },
      ),
    );
  });

  it('learning rate schedule - a bad schedule is refused naming the field', () => {
    const refused =
      (value: unknown, learningRate = 0.1) =>
      () =>
        resolveLearningRateSchedule(value, learningRate);
    expect(refused({ type: 'step', every: 0 })).toThrow('optimizer.schedule.every = 0: must be an integer >= 1');
    expect(refused({ type: 'step' })).toThrow('optimizer.schedule.every: is required');
    expect(refused({ type: 'step', every: 2, factor: 1.5 })).toThrow(
      'optimizer.schedule.factor = 1.5: must be in (0, 1]',
    );
    expect(refused({ type: 'exponential', decayRate: 0.5, decaySteps: 1.5 })).toThrow(/schedule.decaySteps = 1.5/);
    expect(refused({ type: 'cosine', steps: 10, minLearningRate: 0.5 })).toThrow(
      'optimizer.schedule.minLearningRate = 0.5: must be in [0, learningRate] (learningRate is 0.1)',
    );
    expect(refused({ type: 'constant', warmupSteps: -1 })).toThrow(/schedule.warmupSteps = -1/);
    expect(refused({ type: 'linear' })).toThrow(/schedule.type = "linear": expected one of constant, step/);
    expect(refused([])).toThrow(InvalidHyperparameterError);
  });
});
