import type { SeededRandom } from '#libs/data-order';

/**
 * A shuffle buffer of fixed capacity, as `tf.data`'s `shuffle`: items fill it, then each new
 * item takes the place of one chosen uniformly among those held, which comes out; at the end the
 * rest come out in random order. Every item comes out exactly once, and the same generator state
 * gives the same order. A capacity of at least the number of items gives a uniform permutation;
 * a capacity of 1 gives the input order.
 */
export class ShuffleBuffer<T> {
  private readonly held: T[] = [];

  /** @throws RangeError when `capacity` is not a positive integer. */
  constructor(
    readonly capacity: number,
    private readonly random: SeededRandom,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`shuffle buffer capacity ${capacity} must be a positive integer`);
    }
  }

  /** Items held now. */
  get size(): number {
    return this.held.length;
  }

  /** Adds `item`; once the buffer is full, returns the held item it replaced, else undefined. */
  push(item: T): T | undefined {
    if (this.held.length < this.capacity) {
      this.held.push(item);
      return undefined;
    }
    const j = this.random.below(this.capacity);
    const out = this.held[j]!;
    this.held[j] = item;
    return out;
  }

  /** Takes out one held item chosen uniformly; undefined when the buffer is empty. */
  take(): T | undefined {
    if (this.held.length === 0) return undefined;
    const j = this.random.below(this.held.length);
    const out = this.held[j]!;
    this.held[j] = this.held[this.held.length - 1]!;
    this.held.pop();
    return out;
  }
}
