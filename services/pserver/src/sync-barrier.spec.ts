import fc from 'fast-check';
import { SyncBarrier } from './sync-barrier.js';

const grads = (values: number[]) => new Map([['w', Float32Array.from(values)]]);

describe('sync barrier', () => {
  it('sync barrier - steps once every counted member has pushed', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('b', 0);
    b.add('a', 1, grads([1]));
    expect(b.ready(0)).toBe(false);
    b.add('b', 1, grads([3]));
    expect(b.ready(0)).toBe(true);
    expect(Array.from(b.take().average.get('w')!)).toEqual([2]);
    expect(b.pending).toBe(0);
    expect(b.ready(1)).toBe(false);
  });

  it('sync barrier - a joining trainer counts from its version on, not before', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    expect(b.join('late', 6)).toBe(6);
    b.add('a', 4, grads([1]));
    expect(b.ready(5)).toBe(true);
    expect(b.ready(6)).toBe(false);
    // Joining again keeps the original version.
    expect(b.join('late', 9)).toBe(6);
  });

  it('sync barrier - a member asked to count from a later version leaves the quorums before it; never an earlier one', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('b', 5);
    b.add('a', 4, grads([1]));
    expect(b.ready(5)).toBe(false);
    expect(b.join('b', 0, 6)).toBe(6);
    expect(b.countedFrom('b')).toBe(6);
    expect(b.ready(5)).toBe(true);
    expect(b.join('b', 0, 3)).toBe(6);
    expect(b.join('new', 2, 8)).toBe(8);
    expect(b.countedFrom('gone')).toBeUndefined();
  });

  it('sync barrier - a leave shrinks the quorum of the open version at once', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('b', 0);
    b.join('c', 0);
    b.add('a', 1, grads([1]));
    b.add('b', 1, grads([1]));
    expect(b.ready(0)).toBe(false);
    expect(b.leave('c')).toBe(true);
    expect(b.ready(0)).toBe(true);
    expect(b.memberIds()).toEqual(['a', 'b']);
  });

  it('sync barrier - no deadlock when everyone leaves after pushing', () => {
    const b = new SyncBarrier(3);
    b.join('a', 0);
    b.join('b', 0);
    b.add('a', 2, grads([5]));
    b.leave('a');
    b.leave('b');
    expect(b.ready(0)).toBe(true);
    expect(b.take().samples).toBe(2);
  });

  it('sync barrier - nothing is ready without a contribution', () => {
    const b = new SyncBarrier();
    expect(b.ready(0)).toBe(false);
    b.join('a', 1);
    expect(b.ready(0)).toBe(false);
  });

  it('sync barrier - contributions of non-members and not-yet-counted members are added', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('new', 1);
    b.add('stranger', 1, grads([10]));
    b.add('new', 1, grads([20]));
    expect(b.ready(0)).toBe(false);
    b.add('a', 2, grads([0]));
    expect(b.ready(0)).toBe(true);
    expect(Array.from(b.take().average.get('w')!)).toEqual([7.5]);
  });

  it('sync barrier - minContributors holds the step while that many trainers are members', () => {
    const b = new SyncBarrier(2);
    b.join('a', 0);
    b.join('b', 1);
    b.add('a', 1, grads([1]));
    expect(b.ready(0)).toBe(false);
    b.leave('b');
    expect(b.ready(0)).toBe(true);
  });

  it('sync barrier - the same trainer cannot contribute twice to a version', () => {
    const b = new SyncBarrier();
    b.add('a', 1, grads([1]));
    expect(b.hasContributed('a')).toBe(true);
    expect(() => b.add('a', 1, grads([1]))).toThrow(/already contributed/);
  });

  it('sync barrier - the average is weighted by samples', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            samples: fc.integer({ min: 1, max: 1000 }),
            g: fc.array(fc.float({ min: -100, max: 100, noNaN: true }).map(Math.fround), {
              minLength: 3,
              maxLength: 3,
            }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        (pushes) => {
          const b = new SyncBarrier();
          pushes.forEach((p, i) => b.add(`t${i}`, p.samples, grads(p.g)));
          const { average, samples } = b.take();
          const total = pushes.reduce((n, p) => n + p.samples, 0);
          expect(samples).toBe(total);
          for (let j = 0; j < 3; j++) {
            const exact = pushes.reduce((s, p) => s + p.g[j] * p.samples, 0) / total;
            // Equal as numbers: a round of one passes its contribution through as it is, so a -0
            // in it stays -0, where this sum, starting from +0, gives +0 (adding 0 makes both +0).
            expect(average.get('w')![j]! + 0).toBe(Math.fround(exact) + 0);
          }
        },
      ),
    );
  });

  it('sync barrier - with backup trainers the step waits for all counted members but that many', () => {
    const b = new SyncBarrier(3, undefined, 1);
    for (const id of ['a', 'b', 'c']) b.join(id, 0);
    b.add('a', 1, grads([1]));
    expect(b.ready(0)).toBe(false);
    b.add('b', 1, grads([3]));
    expect(b.ready(0)).toBe(true);
    expect(b.take().contributors).toEqual(['a', 'b']);
    // Two leave: the one left steps alone.
    b.leave('b');
    b.leave('c');
    b.add('a', 1, grads([1]));
    expect(b.ready(1)).toBe(true);
  });

  it('sync barrier - contributions ahead wait for their version, and a member that moved past the open one is not waited for', () => {
    const b = new SyncBarrier(2);
    b.join('a', 0);
    b.join('b', 0);
    b.add('a', 1, grads([1]));
    b.add('a', 1, grads([10]), 1);
    expect(b.hasContributed('a', 1)).toBe(true);
    expect(b.ready(0)).toBe(false);
    b.add('b', 1, grads([3]));
    expect(b.ready(0)).toBe(true);
    expect(Array.from(b.take().average.get('w')!)).toEqual([2]);
    // Version 1 is now the open one, holding a's contribution.
    expect(b.pending).toBe(1);
    expect(b.ready(1)).toBe(false);
    b.add('b', 1, grads([20]));
    expect(Array.from(b.take().average.get('w')!)).toEqual([15]);
    // b skipped version 2: once a leaves, version 2 steps with nothing, then 3 with b's.
    b.add('b', 1, grads([7]), 1);
    expect(b.ready(2)).toBe(false);
    b.leave('a');
    expect(b.ready(2)).toBe(true);
    expect(b.take().average.size).toBe(0);
    expect(b.ready(3)).toBe(true);
    const last = b.take();
    expect(last.contributors).toEqual(['b']);
    expect(Array.from(last.average.get('w')!)).toEqual([7]);
    expect(b.take()).toMatchObject({ samples: 0, contributors: [] });
  });

  it('sync barrier - an empty open version waits while no member has moved past it', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.add('stranger', 1, grads([1]), 1);
    expect(b.ready(0)).toBe(false);
    b.add('a', 1, grads([1]), 2);
    expect(b.ready(0)).toBe(true);
    expect(b.take().average.size).toBe(0);
  });

  it('sync barrier - a round of one steps with the contribution itself, unsummed', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    const pushed = grads([0.1, -3e-39, 7]);
    b.add('a', 37, pushed);
    const { average, samples, contributors } = b.take();
    expect(average.get('w')).toBe(pushed.get('w'));
    expect({ samples, contributors }).toEqual({ samples: 37, contributors: ['a'] });
  });

  it('sync barrier - a borrowed first contribution is summed by settle, so its arrays may change after', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('b', 0);
    const first = grads([1, 2]);
    b.add('a', 1, first);
    b.settle();
    first.get('w')!.fill(100);
    b.add('b', 3, grads([5, 6]));
    expect(Array.from(b.take().average.get('w')!)).toEqual([4, 5]);
  });

  it('sync barrier - a first contribution not yet settled is summed when the second comes', () => {
    const b = new SyncBarrier();
    b.join('a', 0);
    b.join('b', 0);
    b.add('a', 1, grads([1]));
    b.add('b', 1, grads([3]));
    b.settle();
    expect(Array.from(b.take().average.get('w')!)).toEqual([2]);
  });

  it('sync barrier - a round of one averages to its contribution exactly, whatever its examples', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 2 ** 28 }),
        (values, samples) => {
          const settled = new SyncBarrier();
          settled.join('a', 0);
          settled.add('a', samples, grads(values));
          // Summing the one contribution, as a round with more would, gives the same values.
          settled.settle();
          const summed = settled.take().average.get('w')!;
          const sole = new SyncBarrier();
          sole.join('a', 0);
          sole.add('a', samples, grads(values));
          const taken = sole.take().average.get('w')!;
          for (let i = 0; i < values.length; i++) expect(taken[i] === summed[i]).toBe(true);
        },
      ),
    );
  });
});
