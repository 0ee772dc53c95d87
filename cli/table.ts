/** A column of a plain-text table: its heading and whether its cells are right-aligned (numbers). */
export interface Column {
  readonly heading: string;
  readonly numeric?: boolean;
}

/** Formats a number with thousands separators, for tables meant to be read. */
export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** Lays rows out under their headings, columns separated by two spaces; one string per line. */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[], indent = ''): string[] {
  const widths = columns.map((c, i) => Math.max(c.heading.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    indent +
    cells
      .map((cell, i) => (columns[i]?.numeric === true ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.heading)), ...rows.map(line)];
}
