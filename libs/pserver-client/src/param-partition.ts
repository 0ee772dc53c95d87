import { MalformedTensorError, elementCount, sameShape } from '#libs/pserver-protocol';
import type { ParamInfo, ParamTensor, TensorLike } from './shard-fanout.js';

/**
 * Large parameters cut into blocks of rows that the shards hold like parameters of their own,
 * so that a model with one big weight matrix (the first layer of an MLP holds 99 % of the
 * example's values) keeps every shard busy instead of one. This is what TensorFlow's variable
 * partitioners and PaddlePaddle's parameter blocks do. The trainers and the evaluator cut and
 * join; the shards, their checkpoints and their optimizers see only the blocks, which is exact
 * for element-wise optimizers (SGD, momentum, Adam).
 *
 * A parameter of `rows` rows along its first axis, each of `rowSize` elements, is cut into
 * `min(shardCount, floor(rows / ceil(minElements / rowSize)))` parts when that is at least 2:
 * every part has `floor(rows / parts)` rows and the first `rows % parts` one more, so no part
 * holds fewer than `minElements` elements. Part `k` of `name` is called `name/part_k`. The rule
 * depends only on the parameter list, the shard count and `minElements`, so every trainer and
 * the evaluator cut the same way; `minElements` 0 keeps every parameter whole.
 */

/** One block of a parameter as the shards hold it. */
interface Part extends ParamInfo {
  /** First element of the block in the whole parameter. */
  offset: number;
  /** Elements in the block. */
  size: number;
}

/** A parameter of the model and the blocks it travels as (one, named as itself, when whole). */
interface Cut {
  param: ParamInfo;
  /** Elements in the whole parameter. */
  size: number;
  parts: Part[];
}

/** Two parameters would have the same name on the shards. */
export class PartitionError extends Error {
  override readonly name = 'PartitionError';
}

/** The name of part `k` of parameter `name`. */
export function partName(name: string, k: number): string {
  return `${name}/part_${k}`;
}

function cutParam(param: ParamInfo, shardCount: number, minElements: number): Cut {
  const size = elementCount(param.shape);
  const rows = param.shape[0] ?? 1;
  const rowSize = rows === 0 ? 0 : size / rows;
  const minRows = Math.max(1, Math.ceil(minElements / Math.max(rowSize, 1)));
  const count = minElements > 0 && rowSize > 0 ? Math.min(shardCount, Math.floor(rows / minRows)) : 1;
  if (count < 2) return { param, size, parts: [{ name: param.name, shape: [...param.shape], offset: 0, size }] };
  const parts: Part[] = [];
  let row = 0;
  for (let k = 0; k < count; k++) {
    const partRows = Math.floor(rows / count) + (k < rows % count ? 1 : 0);
    parts.push({
      name: partName(param.name, k),
      shape: [partRows, ...param.shape.slice(1)],
      offset: row * rowSize,
      size: partRows * rowSize,
    });
    row += partRows;
  }
  return { param, size, parts };
}

/** How a model's parameters are cut into the blocks the shards hold; see the module comment. */
export class ParamPartition {
  private readonly cuts: Cut[];
  private readonly byName: ReadonlyMap<string, Cut>;

  /**
   * @throws PartitionError when `minElements` is not an integer >= 0, or a part's name is the
   *   name of another parameter of the model.
   */
  constructor(params: readonly ParamInfo[], shardCount: number, minElements: number) {
    if (!Number.isInteger(minElements) || minElements < 0) {
      throw new PartitionError(`pservers.partition.minElements must be an integer >= 0, got ${minElements}`);
    }
    this.cuts = params.map((p) => cutParam(p, shardCount, minElements));
    this.byName = new Map(this.cuts.map((c) => [c.param.name, c]));
    const holder = new Map<string, string>();
    for (const { param, parts } of this.cuts) {
      for (const part of parts) {
        const what = part.name === param.name ? `parameter "${param.name}"` : `a block of parameter "${param.name}"`;
        const other = holder.get(part.name);
        if (other !== undefined) {
          throw new PartitionError(
            `"${part.name}" would name both ${other} and ${what} on the shards; rename the layer or set pservers.partition.minElements to 0`,
          );
        }
        holder.set(part.name, what);
      }
    }
  }

  /** Every block, in the model's order (a parameter's parts one after the other). */
  get parts(): ParamInfo[] {
    return this.cuts.flatMap((c) => c.parts.map(({ name, shape }) => ({ name, shape })));
  }

  /**
   * `tensors` (parameters or gradients, named as the model's parameters) as the blocks the
   * shards hold: views of the same memory, nothing copied. A name outside the model is passed on
   * as it is, for the shard map to refuse.
   * @throws MalformedTensorError naming `operation` when a cut parameter comes in another shape
   *   or not as float32.
   */
  split(tensors: readonly TensorLike[], operation: string): TensorLike[] {
    return tensors.flatMap((t) => {
      const cut = this.byName.get(t.name);
      if (cut === undefined || cut.parts.length === 1) return [t];
      if (!(t.data instanceof Float32Array)) {
        throw new MalformedTensorError(t.name, `${operation}: only float32 tensors are trainable`);
      }
      if (!sameShape(t.shape, cut.param.shape) || t.data.length !== cut.size) {
        throw new MalformedTensorError(
          t.name,
          `${operation}: shape [${t.shape.join(', ')}] with ${t.data.length} values is not the parameter's [${cut.param.shape.join(', ')}]`,
        );
      }
      const data = t.data;
      return cut.parts.map((p) => ({ name: p.name, shape: p.shape, data: data.subarray(p.offset, p.offset + p.size) }));
    });
  }

  /**
   * The model's parameters from `parts`, the blocks in the order of {@link parts}: a whole
   * parameter is passed on, a cut one is copied together into one array.
   */
  join(parts: readonly ParamTensor[]): ParamTensor[] {
    let next = 0;
    return this.cuts.map(({ param, size, parts: cut }) => {
      if (cut.length === 1) return parts[next++]!;
      const data = new Float32Array(size);
      for (const p of cut) data.set(parts[next++]!.data, p.offset);
      return { name: param.name, dtype: 'float32', shape: [...param.shape], data };
    });
  }
}
