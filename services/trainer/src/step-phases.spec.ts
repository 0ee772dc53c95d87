import { WireClock } from '#libs/pserver-protocol';
import { StepPhases } from './step-phases.js';

describe('step phases', () => {
  let now = 0;
  const phases = () => new StepPhases(() => now);

  beforeEach(() => {
    now = 1000;
  });

  it('step phases - means per step of each phase, the rest of the wall time as idle', async () => {
    const p = phases();
    for (let step = 0; step < 2; step++) {
      await p.time('wait', async () => {
        now += 3;
      });
      p.timeSync('train', () => {
        now += 10;
      });
      p.add('push', 5);
      now += 5;
      now += 2; // bookkeeping between the push and the end of the step
      p.endStep();
    }
    expect(p.take()).toEqual({
      wait: 3,
      decode: 0,
      load: 0,
      train: 10,
      getUpdate: 0,
      encode: 0,
      push: 5,
      unpack: 0,
      idle: 2,
    });
  });

  it('step phases - the codec time within the push and the pull goes to encode and unpack', async () => {
    const clock = new WireClock(() => now);
    const p = new StepPhases(
      () => now,
      undefined,
      () => clock.read(),
    );
    await p.time('wait', async () => {
      now += 2;
      clock.decoding(() => (now += 0.5));
    });
    p.timeSync('train', () => {
      now += 10;
    });
    await p.time('push', async () => {
      clock.encoding(() => (now += 1));
      now += 3;
      clock.decoding(() => (now += 0.75));
    });
    // Codec time outside the network calls stays where it happened.
    await p.time('decode', async () => {
      clock.decoding(() => (now += 0.25));
    });
    now += 1; // bookkeeping
    p.endStep();
    expect(p.take()).toEqual({
      wait: 2,
      decode: 0.25,
      load: 0,
      train: 10,
      getUpdate: 0,
      encode: 1,
      push: 3,
      unpack: 1.25,
      idle: 1,
    });
  });

  it('step phases - minibatches assembled during the push and the pull go to decode', async () => {
    let assembled = 0;
    const p = new StepPhases(
      () => now,
      undefined,
      undefined,
      () => assembled,
    );
    await p.time('wait', async () => {
      now += 2;
      assembled += 0.5;
      now += 0.5;
    });
    p.timeSync('train', () => {
      now += 10;
    });
    await p.time('push', async () => {
      now += 1;
      assembled += 3;
      now += 3;
    });
    // Assembly within the loop's own wait for its minibatch is that phase's already.
    await p.time('decode', async () => {
      assembled += 0.25;
      now += 0.25;
    });
    p.endStep();
    expect(p.take()).toEqual({
      wait: 2,
      decode: 3.75,
      load: 0,
      train: 10,
      getUpdate: 0,
      encode: 0,
      push: 1,
      unpack: 0,
      idle: 0,
    });
  });

  it('step phases - each take starts a new window; none without a step', () => {
    const p = phases();
    expect(p.take()).toBeUndefined();
    p.add('train', 4);
    now += 4;
    p.endStep();
    expect(p.take()?.train).toBe(4);
    expect(p.take()).toBeUndefined();
  });

  it('step phases - a pause between tasks is not counted as idle', () => {
    const p = phases();
    p.timeSync('train', () => {
      now += 4;
    });
    p.endStep();
    now += 500;
    p.pause();
    p.timeSync('train', () => {
      now += 4;
    });
    p.endStep();
    expect(p.take()).toMatchObject({ train: 4, idle: 0 });
  });

  it('step phases - a phase that throws is still timed', async () => {
    const p = phases();
    await expect(
      p.time('push', async () => {
        now += 7;
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    p.endStep();
    expect(p.take()?.push).toBe(7);
  });

  it('step phases - onStep receives each step on its own, its idle time included', () => {
    const steps: Record<string, number>[] = [];
    const p = new StepPhases(
      () => now,
      (step) => steps.push(step),
    );
    p.timeSync('train', () => {
      now += 4;
    });
    now += 1;
    p.endStep();
    p.timeSync('push', () => {
      now += 2;
    });
    p.endStep();
    expect(steps).toEqual([
      { wait: 0, decode: 0, load: 0, train: 4, getUpdate: 0, encode: 0, push: 0, unpack: 0, idle: 1 },
      { wait: 0, decode: 0, load: 0, train: 0, getUpdate: 0, encode: 0, push: 2, unpack: 0, idle: 0 },
    ]);
  });
});
