import type { SeededRandom } from './seeded-random.js';

/**
 * Shuffles `items` in place with the Fisher–Yates algorithm (from the last position down, each
 * swapped with a uniform position at or before it) and returns it. Every order is equally likely,
 * and the same generator state always gives the same order.
 */
export function shuffleInPlace<T>(items: T[], random: SeededRandom): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = random.below(i + 1);
    const swapped = items[i]!;
    items[i] = items[j]!;
    items[j] = swapped;
  }
  return items;
}

/** `0 .. n-1` in an order drawn by {@link shuffleInPlace}. */
export function permutation(n: number, random: SeededRandom): number[] {
  return shuffleInPlace(
    Array.from({ length: n }, (_, i) => i),
    random,
  );
}
