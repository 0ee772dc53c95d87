import fc from 'fast-check';
import { InvalidTaskSizeError } from './errors.js';
import { planTasks, type ChunkRef } from './task-plan.js';

function chunks(n: number): ChunkRef[] {
  return Array.from({ length: n }, (_, i) => ({
    file: `/data/f${i % 3}.recordio`,
    offset: i * 100,
    numRecords: i + 1,
  }));
}

describe('task plan', () => {
  test('task plan - groups consecutive chunks, the last task takes the rest', () => {
    const plan = planTasks(chunks(7), 3);
    expect(plan.map((t) => t.taskId)).toEqual([0, 1, 2]);
    expect(plan.map((t) => t.chunks.length)).toEqual([3, 3, 1]);
    expect(plan[0]!.chunks.map((c) => c.offset)).toEqual([0, 100, 200]);
    expect(plan[2]!.records).toBe(7);
  });

  test('task plan - an empty chunk list gives no task', () => {
    expect(planTasks([], 2)).toEqual([]);
  });

  test('task plan - chunksPerTask must be a positive integer', () => {
    expect(() => planTasks(chunks(2), 0)).toThrow(InvalidTaskSizeError);
    expect(() => planTasks(chunks(2), 1.5)).toThrow('chunksPerTask must be a positive integer, got 1.5');
  });

  test('task plan - every chunk lands in exactly one task, in order', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 1, max: 10 }), (n, per) => {
        const list = chunks(n);
        const plan = planTasks(list, per);
        expect(plan.length).toBe(Math.ceil(n / per));
        expect(plan.flatMap((t) => t.chunks)).toEqual(list);
        expect(plan.every((t, i) => t.taskId === i && t.chunks.length >= 1 && t.chunks.length <= per)).toBe(true);
        expect(plan.reduce((s, t) => s + t.records, 0)).toBe(list.reduce((s, c) => s + c.numRecords, 0));
      }),
    );
  });
});
