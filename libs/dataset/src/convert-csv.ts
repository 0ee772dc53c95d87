import type { Compressor } from '#libs/recordio';
import { CHUNKS_PER_FILE, DATASET_COMPRESSOR, DATASET_MAX_CHUNK_SIZE_BYTES } from './defaults.js';
import { CsvFormatError } from './errors.js';
import { encodeExample, type LabelDtype } from './example-record.js';
import { type CsvRow, readCsvRows } from './csv-reader.js';
import { requireFiles } from './source-file.js';
import { type ProgressCallback, progressTicker } from './progress.js';
import { type ConversionSummary, ShardedRecordWriter, validateShardOptions } from './shard-writer.js';

/** Options of {@link convertCsv}. */
export interface ConvertCsvOptions {
  /** CSV file with a header row. */
  readonly input: string;
  /** Name of the label column; defaults to the last column. */
  readonly labelColumn?: string;
  /** Names of the feature columns, in the order they are stored; defaults to every other column. */
  readonly featureColumns?: readonly string[];
  /** Forces the label type; by default int32 when every label is an integer, float32 otherwise. */
  readonly labelType?: LabelDtype;
  /** Shards are written as `<outPrefix>-00000.recordio`, ... */
  readonly outPrefix: string;
  /** Defaults to {@link DATASET_MAX_CHUNK_SIZE_BYTES}. */
  readonly maxChunkSizeBytes?: number;
  /** Defaults to {@link CHUNKS_PER_FILE}. */
  readonly chunksPerFile?: number;
  /** Defaults to {@link DATASET_COMPRESSOR} (snappy). */
  readonly compressor?: Compressor;
  readonly onProgress?: ProgressCallback;
}

/** Decimal numbers as written by spreadsheets and numeric libraries (no hex, no NaN, no Infinity). */
const NUMBER_PATTERN = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;
const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;

interface CsvLayout {
  readonly header: readonly string[];
  readonly labelIndex: number;
  readonly featureIndices: readonly number[];
}

function columnIndex(file: string, header: readonly string[], name: string, role: string): number {
  const index = header.indexOf(name);
  if (index < 0) {
    throw new CsvFormatError(`${file}:1: ${role} column ${JSON.stringify(name)} is not in the header`);
  }
  if (header.lastIndexOf(name) !== index) {
    throw new CsvFormatError(`${file}:1: ${role} column ${JSON.stringify(name)} appears more than once in the header`);
  }
  return index;
}

function layoutFromHeader(file: string, header: readonly string[], options: ConvertCsvOptions): CsvLayout {
  const names = header.map((h) => h.trim());
  const labelIndex =
    options.labelColumn === undefined ? names.length - 1 : columnIndex(file, names, options.labelColumn, 'label');
  const featureIndices =
    options.featureColumns === undefined
      ? names.map((_, i) => i).filter((i) => i !== labelIndex)
      : options.featureColumns.map((name) => columnIndex(file, names, name, 'feature'));
  if (featureIndices.includes(labelIndex)) {
    throw new CsvFormatError(`${file}: column ${JSON.stringify(names[labelIndex])} cannot be both label and feature`);
  }
  if (featureIndices.length === 0) throw new CsvFormatError(`${file}: no feature columns`);
  return { header: names, labelIndex, featureIndices };
}

function parseCell(file: string, row: CsvRow, layout: CsvLayout, column: number): number {
  const text = row.cells[column]!;
  if (!NUMBER_PATTERN.test(text)) {
    throw new CsvFormatError(
      `${file}:${row.line}: column ${column + 1} (${JSON.stringify(layout.header[column])}): ${JSON.stringify(text)} is not a number`,
    );
  }
  return Number(text);
}

function checkWidth(file: string, row: CsvRow, layout: CsvLayout): void {
  if (row.cells.length !== layout.header.length) {
    throw new CsvFormatError(
      `${file}:${row.line}: expected ${layout.header.length} columns like the header, got ${row.cells.length}`,
    );
  }
}

function isInt32(value: number): boolean {
  return Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX;
}

/**
 * Converts a CSV file with a header row into RecordIO shards, one example record per row, in
 * file order. Features are float32 of shape `[nFeatures]`. The file is read twice: once to
 * check every cell and settle the label type, then to write, so memory stays flat whatever the
 * file's size.
 * @throws MissingDatasetFileError when the file cannot be read.
 * @throws CsvFormatError naming the line and column of the first non-numeric cell, a row of the
 *   wrong width, or an unknown column name.
 */
export async function convertCsv(options: ConvertCsvOptions): Promise<ConversionSummary> {
  const file = options.input;
  const shardOptions = {
    outPrefix: options.outPrefix,
    maxChunkSizeBytes: options.maxChunkSizeBytes ?? DATASET_MAX_CHUNK_SIZE_BYTES,
    chunksPerFile: options.chunksPerFile ?? CHUNKS_PER_FILE,
    compressor: options.compressor ?? DATASET_COMPRESSOR,
  };
  validateShardOptions(shardOptions);
  await requireFiles(file);

  let layout: CsvLayout | undefined;
  let rows = 0;
  let allLabelsInt32 = true;
  for await (const row of readCsvRows(file)) {
    if (layout === undefined) {
      layout = layoutFromHeader(file, row.cells, options);
      continue;
    }
    checkWidth(file, row, layout);
    for (const column of layout.featureIndices) parseCell(file, row, layout, column);
    const label = parseCell(file, row, layout, layout.labelIndex);
    if (!isInt32(label)) {
      if (options.labelType === 'int32') {
        throw new CsvFormatError(
          `${file}:${row.line}: column ${layout.labelIndex + 1} (${JSON.stringify(layout.header[layout.labelIndex])}): label ${JSON.stringify(row.cells[layout.labelIndex])} is not an int32`,
        );
      }
      allLabelsInt32 = false;
    }
    rows++;
  }
  if (layout === undefined) throw new CsvFormatError(`${file}: empty file, a header row is required`);
  const labelDtype: LabelDtype = options.labelType ?? (allLabelsInt32 ? 'int32' : 'float32');

  const writer = new ShardedRecordWriter(shardOptions);
  const tick = progressTicker(rows, options.onProgress);
  const shape = [layout.featureIndices.length];
  let done = 0;
  let header = true;
  for await (const row of readCsvRows(file)) {
    if (header) {
      header = false;
      continue;
    }
    const features = new Float32Array(layout.featureIndices.length);
    layout.featureIndices.forEach((column, i) => {
      features[i] = Number(row.cells[column]);
    });
    const label = Number(row.cells[layout.labelIndex]);
    await writer.write(encodeExample({ features, shape, labelDtype, label }));
    tick(++done);
  }
  return writer.close();
}
