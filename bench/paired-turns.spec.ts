import { pairedTurns } from './paired-turns.js';

describe('paired turns', () => {
  it('paired turns - the baseline goes first in even pairs, ours in odd ones; ratios are ours over the baseline', async () => {
    const order: string[] = [];
    const figures = { ours: [2, 6, 3], baseline: [1, 2, 4] };
    const seen: [number, number, number][] = [];

    const turns = await pairedTurns(
      3,
      {
        ours: async () => (order.push('ours'), figures.ours[seen.length]!),
        baseline: async () => (order.push('baseline'), figures.baseline[seen.length]!),
      },
      (pair, ours, baseline) => seen.push([pair, ours, baseline]),
    );

    expect(order).toEqual(['baseline', 'ours', 'ours', 'baseline', 'baseline', 'ours']);
    expect(seen).toEqual([
      [0, 2, 1],
      [1, 6, 2],
      [2, 3, 4],
    ]);
    expect(turns).toEqual({ ours: [2, 6, 3], baseline: [1, 2, 4], ratios: [2, 3, 0.75], ratio: 2 });
  });
});
