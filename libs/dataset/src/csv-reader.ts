import { createReadStream } from 'node:fs';
import { CsvFormatError } from './errors.js';

/** One CSV row and the line it starts on (1-based; the header is line 1). */
export interface CsvRow {
  readonly line: number;
  readonly cells: string[];
}

/**
 * Streams the rows of a CSV file (RFC 4180: comma separated, double-quoted fields with `""` as
 * an escaped quote, LF or CRLF line ends, an optional UTF-8 byte order mark). Blank lines are
 * skipped.
 * @throws CsvFormatError on an unterminated quoted field or text after a closing quote.
 */
export async function* readCsvRows(file: string): AsyncGenerator<CsvRow> {
  let cells: string[] = [];
  let cell = '';
  let inQuotes = false;
  let afterQuote = false; // the current field was quoted and its closing quote has been read
  let line = 1;
  let rowLine = 1;
  let first = true;
  let pendingQuote = false; // a quote inside a quoted field at the end of a piece: escape or close?
  let pendingCR = false;

  const endRow = (): CsvRow | undefined => {
    cells.push(cell);
    const row = cells;
    cells = [];
    cell = '';
    afterQuote = false;
    if (row.length === 1 && row[0] === '') return undefined;
    return { line: rowLine, cells: row };
  };

  for await (const piece of createReadStream(file, { encoding: 'utf8' })) {
    let text = piece as string;
    if (first) {
      first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (pendingCR) {
        pendingCR = false;
        if (ch === '\n') continue;
      }
      if (pendingQuote) {
        pendingQuote = false;
        if (ch === '"') {
          cell += '"';
          continue;
        }
        inQuotes = false;
        afterQuote = true;
      }
      if (inQuotes) {
        if (ch === '"') {
          pendingQuote = true;
        } else {
          if (ch === '\n') line++;
          cell += ch;
        }
        continue;
      }
      if (ch === ',') {
        cells.push(cell);
        cell = '';
        afterQuote = false;
      } else if (ch === '\n' || ch === '\r') {
        const row = endRow();
        if (row !== undefined) yield row;
        line++;
        rowLine = line;
        pendingCR = ch === '\r';
      } else if (afterQuote) {
        throw new CsvFormatError(`${file}:${line}: unexpected ${JSON.stringify(ch)} after a closing quote`);
      } else if (ch === '"' && cell === '') {
        inQuotes = true;
      } else {
        cell += ch;
      }
    }
  }
  if (pendingQuote) {
    inQuotes = false;
  }
  if (inQuotes) {
    throw new CsvFormatError(`${file}:${rowLine}: quoted field is not closed before the end of the file`);
  }
  const row = endRow();
  if (row !== undefined) yield row;
}
