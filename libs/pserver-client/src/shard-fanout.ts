import { status as GrpcStatus } from '@grpc/grpc-js';
import { MalformedTensorError, sameShape, type NamedTensor, type ShardMap } from '#libs/pserver-protocol';
import { PserverError, ShardCallError, fromServiceError } from './errors.js';
import type { PulledShard } from './pserver-client.js';

/** Name and shape of one model parameter. */
export interface ParamInfo {
  name: string;
  shape: readonly number[];
}

/** A parameter or gradient as the learner hands it over; `data` must be a `Float32Array`. */
export interface TensorLike {
  name: string;
  shape: readonly number[];
  data: ArrayBufferView;
}

/** A parameter as pulled: float32, ready for `Learner.setParams`. */
export interface ParamTensor {
  name: string;
  dtype: 'float32';
  shape: number[];
  data: Float32Array;
}

/**
 * Runs `fn` for every shard from `from` to `shardCount - 1`, concurrently, and waits for all of
 * them; any failure is a `ShardCallError` naming each failed shard's error.
 */
export async function everyShard<T>(
  shardCount: number,
  operation: string,
  fn: (shard: number) => Promise<T>,
  from = 0,
): Promise<T[]> {
  const shards = Array.from({ length: shardCount - from }, (_, i) => i + from);
  const settled = await Promise.allSettled(shards.map(fn));
  const errors: (PserverError | undefined)[] = [];
  settled.forEach((r, i) => {
    if (r.status === 'rejected') errors[shards[i]] = fromServiceError(r.reason, shards[i]);
  });
  if (errors.some((e) => e)) throw new ShardCallError(operation, errors);
  return settled.map((r) => (r as PromiseFulfilledResult<T>).value);
}

/**
 * Groups tensors by the shard that holds them, refusing names outside the model and data that
 * is not float32 with a `MalformedTensorError` naming `operation`.
 */
export function splitByShard(shardMap: ShardMap, tensors: readonly TensorLike[], operation: string): NamedTensor[][] {
  const byShard: NamedTensor[][] = Array.from({ length: shardMap.shardCount }, () => []);
  for (const t of tensors) {
    if (!shardMap.has(t.name)) {
      throw new MalformedTensorError(t.name, `${operation}: not a parameter of the model`);
    }
    if (!(t.data instanceof Float32Array)) {
      throw new MalformedTensorError(t.name, `${operation}: only float32 tensors are trainable`);
    }
    byShard[shardMap.shardOf(t.name)].push({ name: t.name, shape: t.shape, data: t.data });
  }
  return byShard;
}

/**
 * Puts the tensors pulled from every shard back in the learner's order (`params`); a parameter
 * that no shard returned, or returned with another shape or dtype, is a `PserverError`.
 */
export function inLearnerOrder(
  shardMap: ShardMap,
  params: readonly ParamInfo[],
  shards: readonly PulledShard[],
): ParamTensor[] {
  const byName = new Map<string, { shard: number; tensor: PulledShard['tensors'][number] }>();
  shards.forEach((s, k) => s.tensors.forEach((t) => byName.set(t.name, { shard: k, tensor: t })));
  return params.map((p) => {
    const found = byName.get(p.name);
    const shard = shardMap.shardOf(p.name);
    if (!found) {
      throw new PserverError(
        `shard ${shard} returned no parameter "${p.name}"`,
        shard,
        GrpcStatus.INTERNAL,
        'missing-param',
      );
    }
    const { tensor } = found;
    if (!(tensor.data instanceof Float32Array) || !sameShape(tensor.shape, p.shape)) {
      throw new PserverError(
        `shard ${found.shard} returned "${p.name}" as [${tensor.shape.join(', ')}], expected float32 [${p.shape.join(', ')}]`,
        found.shard,
        GrpcStatus.INTERNAL,
        'unexpected-param',
      );
    }
    return { name: p.name, dtype: 'float32', shape: [...tensor.shape], data: tensor.data };
  });
}
