import fc from 'fast-check';
import { MalformedTensorError, elementCount } from '#libs/pserver-protocol';
import { PartitionError, ParamPartition, partName } from './param-partition.js';
import type { ParamInfo, ParamTensor } from './shard-fanout.js';

const shapes = fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 0, maxLength: 3 });
const models = fc.uniqueArray(fc.record({ name: fc.stringMatching(/^[a-z]{1,6}$/), shape: shapes }), {
  selector: (p) => p.name,
  minLength: 1,
  maxLength: 6,
});

function filled(params: readonly ParamInfo[]): ParamTensor[] {
  let next = 0;
  return params.map((p) => ({
    name: p.name,
    dtype: 'float32',
    shape: [...p.shape],
    data: Float32Array.from({ length: elementCount(p.shape) }, () => next++),
  }));
}

/** What the shards would send back: each block in an array of its own. */
function asPulled(parts: readonly { name: string; shape: readonly number[]; data: ArrayBufferView }[]): ParamTensor[] {
  return parts.map((p) => ({
    name: p.name,
    dtype: 'float32',
    shape: [...p.shape],
    data: new Float32Array(p.data as Float32Array),
  }));
}

describe('parameter partition', () => {
  it('partition - cutting and joining gives back every parameter, in order, value for value', () => {
    fc.assert(
      fc.property(models, fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 200 }), (params, shards, min) => {
        const partition = new ParamPartition(params, shards, min);
        const tensors = filled(params);
        const parts = partition.split(tensors, 'test');
        expect(parts.map((p) => ({ name: p.name, shape: [...p.shape] }))).toEqual(partition.parts);
        expect(partition.join(asPulled(parts))).toEqual(tensors);
      }),
    );
  });

  it('partition - blocks follow the rule: as many as the shards, none under minElements, rows as even as can be', () => {
    fc.assert(
      fc.property(models, fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 200 }), (params, shards, min) => {
        const parts = new ParamPartition(params, shards, min).parts;
        for (const p of params) {
          const rows = p.shape[0] ?? 1;
          const rowSize = elementCount(p.shape) / rows;
          const expected = Math.min(shards, Math.floor(rows / Math.ceil(min / rowSize)));
          const mine = parts.filter((q) => q.name === p.name || q.name.startsWith(`${p.name}/part_`));
          if (expected < 2) {
            expect(mine).toEqual([{ name: p.name, shape: p.shape }]);
            continue;
          }
          expect(mine.map((q) => q.name)).toEqual(Array.from({ length: expected }, (_, k) => partName(p.name, k)));
          const partRows = mine.map((q) => q.shape[0]!);
          expect(partRows.reduce((a, b) => a + b, 0)).toBe(rows);
          expect(Math.max(...partRows) - Math.min(...partRows)).toBeLessThanOrEqual(1);
          for (const q of mine) expect(elementCount(q.shape)).toBeGreaterThanOrEqual(min);
        }
      }),
    );
  });

  it('partition - the example MLP on two shards: the first kernel in two halves, the rest whole', () => {
    const mlp = [
      { name: 'dense/kernel', shape: [784, 128] },
      { name: 'dense/bias', shape: [128] },
      { name: 'out/kernel', shape: [128, 10] },
      { name: 'out/bias', shape: [10] },
    ];
    expect(new ParamPartition(mlp, 2, 8192).parts).toEqual([
      { name: 'dense/kernel/part_0', shape: [392, 128] },
      { name: 'dense/kernel/part_1', shape: [392, 128] },
      ...mlp.slice(1),
    ]);
    expect(new ParamPartition(mlp, 2, 0).parts).toEqual(mlp);
    expect(new ParamPartition(mlp, 1, 8192).parts).toEqual(mlp);
  });

  it('partition - splitting shares the tensors memory and copies nothing', () => {
    const [kernel] = filled([{ name: 'k', shape: [4, 3] }]);
    const parts = new ParamPartition([kernel!], 2, 1).split([kernel!], 'test');
    expect(parts.map((p) => (p.data as Float32Array).buffer)).toEqual([kernel!.data.buffer, kernel!.data.buffer]);
    expect([...(parts[1]!.data as Float32Array)]).toEqual([6, 7, 8, 9, 10, 11]);
  });

  it('partition - a part named like another parameter is refused, naming both', () => {
    const params = [
      { name: 'w', shape: [10, 10] },
      { name: 'w/part_1', shape: [1] },
    ];
    expect(() => new ParamPartition(params, 2, 10)).toThrow(PartitionError);
    expect(() => new ParamPartition(params, 2, 10)).toThrow(
      /"w\/part_1" would name both a block of parameter "w" and parameter "w\/part_1"/,
    );
    expect(new ParamPartition(params, 2, 0).parts).toEqual(params);
  });

  it('partition - a cut parameter in another shape or type is refused, naming it and the call', () => {
    const partition = new ParamPartition([{ name: 'w', shape: [10, 10] }], 2, 10);
    const wrongShape = { name: 'w', shape: [100], data: new Float32Array(100) };
    expect(() => partition.split([wrongShape], 'pushGradients')).toThrow(MalformedTensorError);
    expect(() => partition.split([wrongShape], 'pushGradients')).toThrow(/pushGradients: shape \[100\]/);
    const wrongType = { name: 'w', shape: [10, 10], data: new Float64Array(100) };
    expect(() => partition.split([wrongType], 'initParams')).toThrow(/initParams: only float32/);
    const unknown = { name: 'other', shape: [1], data: new Float32Array(1) };
    expect(partition.split([unknown], 'pushGradients')).toEqual([unknown]);
  });

  it('partition - a negative or fractional smallest block is refused', () => {
    expect(() => new ParamPartition([], 2, -1)).toThrow(PartitionError);
    expect(() => new ParamPartition([], 2, 1.5)).toThrow(PartitionError);
  });
});
