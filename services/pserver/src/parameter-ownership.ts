import { DataType, assignShards, dataTypeName, elementCount, sameShape, type TensorInfo } from '#libs/pserver-protocol';
import { InvalidRequestError, InvalidTensorError } from './errors.js';

/**
 * Which of the model's parameters one shard holds, with their shapes. Every trainer and shard
 * derives it from the model's parameter list (`assignShards`), so the first list a job is told
 * fixes it and a different list later is refused.
 */
export class ParameterOwnership {
  /** Undefined until a parameter list (or a checkpoint) arrives. */
  private owned?: Map<string, number[]>;

  constructor(
    private readonly jobId: string,
    private readonly shard: number,
  ) {}

  /** True once the shard knows its parameters. */
  get known(): boolean {
    return this.owned !== undefined;
  }

  /** The shape of `name` if this shard holds it. */
  shapeOf(name: string): number[] | undefined {
    return this.owned?.get(name);
  }

  /** Names of the parameters this shard holds, in the model's order; empty while unknown. */
  names(): string[] {
    return [...(this.owned?.keys() ?? [])];
  }

  /**
   * Records the model's parameter list (every parameter, the learner's order) and the number of
   * shards. An empty list changes nothing; a list other than the one recorded, a shard count
   * that leaves this shard out, or a non-float32 parameter of this shard is refused.
   */
  record(params: readonly TensorInfo[], shardCount: number): void {
    if (params.length === 0) return;
    if (!Number.isInteger(shardCount) || shardCount <= this.shard) {
      throw new InvalidRequestError('shard_count', `${shardCount} shards cannot include shard ${this.shard}`);
    }
    let map;
    try {
      map = assignShards(
        params.map((p) => ({ name: p.name, size: elementCount(p.shape) })),
        shardCount,
      );
    } catch (cause) {
      throw new InvalidRequestError('params', (cause as Error).message, { cause });
    }
    const owned = new Map<string, number[]>();
    for (const p of params) {
      if (map.shardOf(p.name) !== this.shard) continue;
      if (p.dtype !== DataType.FLOAT32) {
        throw new InvalidTensorError(
          p.name,
          `parameter "${p.name}" is ${dataTypeName(p.dtype)}; only float32 parameters are trainable`,
        );
      }
      owned.set(p.name, [...p.shape]);
    }
    if (this.owned) {
      const recorded = this.owned;
      const differs =
        owned.size !== recorded.size ||
        [...owned].some(([name, shape]) => !sameShape(shape, recorded.get(name) ?? [-1]));
      if (differs) {
        throw new InvalidRequestError(
          'params',
          `job ${this.jobId}: this shard's parameters would be [${describe(owned)}], but the job has [${describe(recorded)}]`,
        );
      }
      return;
    }
    this.owned = owned;
  }

  /** Takes the parameters of a checkpoint as this shard's own. */
  restore(params: readonly { name: string; shape: number[] }[]): void {
    this.owned = new Map(params.map((p) => [p.name, p.shape]));
  }
}

function describe(params: ReadonlyMap<string, readonly number[]>): string {
  return [...params].map(([n, s]) => `${n} [${s.join(', ')}]`).join(', ');
}
