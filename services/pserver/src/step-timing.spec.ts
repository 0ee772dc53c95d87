import { StepTiming } from './step-timing.js';

describe('step timing', () => {
  it('step timing - the barrier runs from the first push to the update; means per step', () => {
    let now = 0;
    const timing = new StepTiming(() => now);
    expect(timing.take()).toBeUndefined();
    timing.opened();
    now += 4;
    timing.opened(); // a second push of the same version changes nothing
    now += 2;
    timing.update(() => {
      now += 1;
    });
    // Asynchronous steps have no barrier.
    timing.update(() => {
      now += 3;
    });
    expect(timing.take()).toEqual({ barrier: 3, update: 2, steps: 2 });
    expect(timing.take()).toBeUndefined();
  });
});
