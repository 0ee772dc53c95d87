import type { Command } from 'commander';
import { type ChunkIndex, compressorName, indexFiles } from '#libs/recordio';
import { type CliIo, OutputStream } from '../cli-io.js';
import { commandGroup } from '../command-group.js';
import { formatCount, formatTable } from '../table.js';

/** One file in the `--json` report. */
interface FileReport {
  readonly file: string;
  readonly sizeBytes: number;
  readonly chunks: readonly {
    readonly offset: number;
    readonly compressor: string;
    readonly records: number;
    readonly compressedBytes: number;
  }[];
  readonly records: number;
}

/** The whole `--json` report: each file's chunks, then totals over all files. */
export interface InspectReport {
  readonly files: readonly FileReport[];
  readonly totals: {
    readonly files: number;
    readonly chunks: number;
    readonly records: number;
    /** Sum of the chunk payload sizes as stored (after compression). */
    readonly compressedBytes: number;
    /** Sum of the file sizes, chunk headers included. */
    readonly fileBytes: number;
    readonly compressors: readonly string[];
  };
}

function fileReport(index: ChunkIndex): FileReport {
  return {
    file: index.file,
    sizeBytes: index.fileSizeBytes,
    chunks: index.chunks.map((c) => ({
      offset: c.offset,
      compressor: compressorName(c.compressor),
      records: c.numRecords,
      compressedBytes: c.compressedSize,
    })),
    records: index.totalRecords,
  };
}

/** Builds the inspection report of the given chunk indexes. */
export function inspectReport(indexes: readonly ChunkIndex[]): InspectReport {
  const files = indexes.map(fileReport);
  const chunks = files.flatMap((f) => f.chunks);
  return {
    files,
    totals: {
      files: files.length,
      chunks: chunks.length,
      records: files.reduce((n, f) => n + f.records, 0),
      compressedBytes: chunks.reduce((n, c) => n + c.compressedBytes, 0),
      fileBytes: files.reduce((n, f) => n + f.sizeBytes, 0),
      compressors: [...new Set(chunks.map((c) => c.compressor))].sort(),
    },
  };
}

function textReport(report: InspectReport): string {
  const lines: string[] = [];
  for (const f of report.files) {
    lines.push(
      `${f.file}: ${formatCount(f.chunks.length)} chunks, ${formatCount(f.records)} records, ${formatCount(f.sizeBytes)} bytes`,
    );
    if (f.chunks.length > 0) {
      lines.push(
        ...formatTable(
          [
            { heading: 'offset', numeric: true },
            { heading: 'compressor' },
            { heading: 'records', numeric: true },
            { heading: 'compressed bytes', numeric: true },
          ],
          f.chunks.map((c) => [String(c.offset), c.compressor, formatCount(c.records), formatCount(c.compressedBytes)]),
          '  ',
        ),
      );
    }
  }
  const t = report.totals;
  lines.push(
    `total: ${formatCount(t.files)} files, ${formatCount(t.chunks)} chunks, ${formatCount(t.records)} records, ` +
      `${formatCount(t.compressedBytes)} compressed bytes, ${formatCount(t.fileBytes)} file bytes, ` +
      `compressors: ${t.compressors.length > 0 ? t.compressors.join(', ') : '-'}`,
  );
  return lines.join('\n') + '\n';
}

/** Registers `tributary recordio inspect FILE... [--json]`. */
export function register(program: Command, io: CliIo): void {
  commandGroup(program, 'recordio', 'look into RecordIO files')
    .command('inspect')
    .description("list each file's chunks (offset, compressor, records, compressed bytes) and totals")
    .argument('<files...>', 'RecordIO files or glob patterns')
    .option('--json', 'print one JSON document instead of tables')
    .action(async (patterns: string[], flags: { json?: boolean }) => {
      const report = inspectReport((await indexFiles(patterns)).fileIndexes);
      const out = new OutputStream(io.stdout);
      try {
        await out.write(flags.json === true ? JSON.stringify(report, null, 2) + '\n' : textReport(report));
      } finally {
        out.release();
      }
    });
}
