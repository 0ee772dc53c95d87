import { InvalidArgumentError } from 'commander';

/** Commander argument parser for a positive integer flag; commander names the flag in its error. */
export function positiveInteger(value: string): number {
  const text = value.trim().replaceAll('_', '');
  if (!/^\d+$/.test(text)) throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(value)}`);
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n <= 0) {
    throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** Commander argument parser for a comma-separated list of names. */
export function commaList(value: string): string[] {
  const names = value.split(',').map((s) => s.trim());
  if (names.some((n) => n.length === 0)) {
    throw new InvalidArgumentError(`expected comma-separated names, got ${JSON.stringify(value)}`);
  }
  return names;
}

/** Commander argument parser for a TCP port (0 picks a free one). */
export function portNumber(value: string): number {
  const n = Number(value.trim());
  if (!/^\d+$/.test(value.trim()) || n > 65_535) {
    throw new InvalidArgumentError(`expected a port from 0 to 65535, got ${JSON.stringify(value)}`);
  }
  return n;
}
