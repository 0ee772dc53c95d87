import { type Command, Option } from 'commander';
import {
  CHUNKS_PER_FILE,
  type ConversionSummary,
  convertCsv,
  convertFashionMnist,
  convertIdx,
  DATASET_COMPRESSOR,
  DATASET_MAX_CHUNK_SIZE_BYTES,
  FASHION_MNIST_MAX_CHUNK_SIZE_BYTES,
  FASHION_MNIST_SOURCE_DIR,
  type LabelDtype,
} from '#libs/dataset';
import { type Compressor, compressorName, parseCompressor } from '#libs/recordio';
import type { CliIo } from '../cli-io.js';
import { commandGroup } from '../command-group.js';
import { commaList, positiveInteger } from '../option-parsers.js';
import { ProgressLine } from '../progress-line.js';
import { formatCount, formatTable } from '../table.js';

/** Flags shared by every converter. */
interface LayoutFlags {
  readonly chunkSize: number;
  readonly chunksPerFile: number;
  readonly compressor: string;
}

/** Adds `--chunk-size`, `--chunks-per-file` and `--compressor` with the given chunk size default. */
function addLayoutOptions(command: Command, defaultChunkSizeBytes: number): Command {
  return command
    .option(
      '--chunk-size <bytes>',
      'start a new chunk when the record bytes in it would exceed this',
      positiveInteger,
      defaultChunkSizeBytes,
    )
    .option('--chunks-per-file <n>', 'chunks in each shard file', positiveInteger, CHUNKS_PER_FILE)
    .addOption(
      new Option('--compressor <name>', 'chunk compression')
        .choices(['none', 'snappy', 'gzip'])
        .default(compressorName(DATASET_COMPRESSOR)),
    );
}

function layout(flags: LayoutFlags): {
  maxChunkSizeBytes: number;
  chunksPerFile: number;
  compressor: Compressor;
} {
  return {
    maxChunkSizeBytes: flags.chunkSize,
    chunksPerFile: flags.chunksPerFile,
    compressor: parseCompressor(flags.compressor),
  };
}

/** Writes the per-split summary table to stdout. */
function printSummary(io: CliIo, summaries: readonly (readonly [string, ConversionSummary])[]): void {
  const rows = summaries.map(([name, s]) => [
    name,
    formatCount(s.files.length),
    formatCount(s.records),
    formatCount(s.chunks),
    formatCount(s.bytes),
  ]);
  const lines = formatTable(
    [
      { heading: 'split' },
      { heading: 'files', numeric: true },
      { heading: 'records', numeric: true },
      { heading: 'chunks', numeric: true },
      { heading: 'bytes', numeric: true },
    ],
    rows,
  );
  for (const [name, s] of summaries) {
    if (s.files.length > 0) lines.push(`${name}: ${s.files[0]}${s.files.length > 1 ? ` ... ${s.files.at(-1)}` : ''}`);
  }
  io.stdout.write(lines.join('\n') + '\n');
}

/** Registers `tributary dataset convert fashion-mnist|idx|csv`. */
export function register(program: Command, io: CliIo): void {
  const dataset = commandGroup(program, 'dataset', 'prepare datasets as RecordIO files');
  const convert = dataset.command('convert').description('convert a dataset into RecordIO shards of example records');

  addLayoutOptions(
    convert
      .command('fashion-mnist')
      .description('convert Fashion-MNIST into DIR/train-NNNNN.recordio and DIR/test-NNNNN.recordio')
      .requiredOption('--out <dir>', 'output directory')
      .option('--source <dir>', 'directory holding the four IDX .gz files', FASHION_MNIST_SOURCE_DIR),
    FASHION_MNIST_MAX_CHUNK_SIZE_BYTES,
  ).action(async (flags: LayoutFlags & { out: string; source: string }) => {
    const progress = { train: new ProgressLine(io.stderr, 'train'), test: new ProgressLine(io.stderr, 'test') };
    const summary = await convertFashionMnist({
      sourceDir: flags.source,
      outDir: flags.out,
      ...layout(flags),
      onProgress: (split, done, total) => progress[split].update(done, total),
    });
    printSummary(io, [
      ['train', summary.train],
      ['test', summary.test],
    ]);
  });

  addLayoutOptions(
    convert
      .command('idx')
      .description('convert an IDX pair (items and labels) into PREFIX-NNNNN.recordio')
      .requiredOption('--images <file>', 'IDX file of the items (gzipped or not)')
      .requiredOption('--labels <file>', 'IDX file of the labels (gzipped or not)')
      .requiredOption('--out <prefix>', 'output path prefix'),
    DATASET_MAX_CHUNK_SIZE_BYTES,
  ).action(async (flags: LayoutFlags & { images: string; labels: string; out: string }) => {
    const progress = new ProgressLine(io.stderr, flags.out);
    const summary = await convertIdx({
      images: flags.images,
      labels: flags.labels,
      outPrefix: flags.out,
      ...layout(flags),
      onProgress: (done, total) => progress.update(done, total),
    });
    printSummary(io, [[flags.out, summary]]);
  });

  addLayoutOptions(
    convert
      .command('csv')
      .description('convert a CSV file with a header row into PREFIX-NNNNN.recordio (float32 features)')
      .argument('<file>', 'CSV file')
      .requiredOption('--out <prefix>', 'output path prefix')
      .option('--label-column <name>', 'label column (default: the last column)')
      .option('--feature-columns <names>', 'comma-separated feature columns (default: all but the label)', commaList)
      .addOption(
        new Option(
          '--label-type <type>',
          'label type (default: int32 if every label is an integer, else float32)',
        ).choices(['int32', 'float32']),
      ),
    DATASET_MAX_CHUNK_SIZE_BYTES,
  ).action(
    async (
      file: string,
      flags: LayoutFlags & { out: string; labelColumn?: string; featureColumns?: string[]; labelType?: LabelDtype },
    ) => {
      const progress = new ProgressLine(io.stderr, flags.out);
      const summary = await convertCsv({
        input: file,
        outPrefix: flags.out,
        labelColumn: flags.labelColumn,
        featureColumns: flags.featureColumns,
        labelType: flags.labelType,
        ...layout(flags),
        onProgress: (done, total) => progress.update(done, total),
      });
      printSummary(io, [[flags.out, summary]]);
    },
  );
}
