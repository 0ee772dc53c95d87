import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { decodeExample, encodeIdx } from '#libs/dataset';
import { Compressor, RecordWriter, scanRecords } from '#libs/recordio';
import type { InspectReport } from './commands/recordio-inspect.js';
import { Writable } from 'node:stream';
import { Capture, runCli } from '../test/support/cli-run.js';
import { main } from './main.js';

const run = runCli;

let dir: string;
const RECORDS_A = ['Hello', '', 'World!', 'x'.repeat(50)].map((s) => new TextEncoder().encode(s));
const RECORDS_B = [Uint8Array.of(0, 1, 2, 255)];
let fileA: string;
let fileB: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-cli-'));
  fileA = join(dir, 'data-a.recordio');
  fileB = join(dir, 'data-b.recordio');
  const a = await RecordWriter.open(fileA, { maxChunkSizeBytes: 12, compressor: Compressor.Snappy });
  for (const r of RECORDS_A) await a.write(r);
  await a.close();
  const b = await RecordWriter.open(fileB, { compressor: Compressor.Gzip });
  for (const r of RECORDS_B) await b.write(r);
  await b.close();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('cli - a wrong flag prints the usage and exits non-zero', async () => {
  const result = await run(['recordio', 'inspect', '--bogus', 'x']);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(/unknown option '--bogus'/);
  expect(result.stderr).toMatch(/Usage: tributary recordio inspect/);
});

test('cli - an unknown command prints the usage and exits non-zero', async () => {
  const result = await run(['frobnicate']);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(/unknown command 'frobnicate'/);
  expect(result.stderr).toMatch(/Usage: tributary/);
});

test('cli - --help prints the commands and exits 0', async () => {
  const result = await run(['--help']);
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(/dataset/);
  expect(result.stdout).toMatch(/recordio/);
});

test('cli - a bad numeric flag is refused naming the flag', async () => {
  const result = await run([
    'dataset',
    'convert',
    'idx',
    '--images',
    'a',
    '--labels',
    'b',
    '--out',
    'c',
    '--chunk-size',
    '12x',
  ]);
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(/option '--chunk-size <bytes>' argument '12x' is invalid/);
  const zero = await run(['dataset', 'convert', 'fashion-mnist', '--out', dir, '--chunks-per-file', '0']);
  expect(zero.code).not.toBe(0);
  expect(zero.stderr).toMatch(/--chunks-per-file <n>' argument '0' is invalid/);
  const compressor = await run(['dataset', 'convert', 'fashion-mnist', '--out', dir, '--compressor', 'lz4']);
  expect(compressor.code).not.toBe(0);
  expect(compressor.stderr).toMatch(/Allowed choices are none, snappy, gzip/);
});

test('cli - errors from the libraries print as "tributary: <message>" with exit code 1, no stack', async () => {
  const result = await run(['recordio', 'inspect', join(dir, 'nothing-*.recordio')]);
  expect(result.code).toBe(1);
  expect(result.stderr).toBe(
    `tributary: no RecordIO file matches the pattern ${JSON.stringify(join(dir, 'nothing-*.recordio'))}\n`,
  );
  const debug = await run(['recordio', 'inspect', join(dir, 'nothing-*.recordio')], { env: { TRIBUTARY_DEBUG: '1' } });
  expect(debug.code).toBe(1);
  expect(debug.stderr).toMatch(/NoMatchingFilesError/);
  expect(debug.stderr).toMatch(/\n\s+at /);
});

test('cli - bad NATS credentials settings are refused before connecting, naming each variable, no secret shown', async () => {
  const env = {
    TRIBUTARY_STATE_DIR: dir,
    NATS_URL: 'nats://127.0.0.1:1',
    NATS_TOKEN: 'hunter2-token',
    NATS_USER: 'ops',
    NATS_CREDS: join(dir, 'missing.creds'),
  };
  const result = await run(['status', 'some-job'], { env });
  expect(result.code).toBe(1);
  expect(result.stderr).toContain(`NATS_CREDS: file "${join(dir, 'missing.creds')}" does not exist`);
  expect(result.stderr).toContain('NATS_PASSWORD: is required when NATS_USER is set');
  expect(result.stderr).toContain('set only one way to authenticate to NATS; found NATS_CREDS, NATS_USER, NATS_TOKEN');
  expect(result.stderr).not.toContain('hunter2');
  const inUrl = await run(['jobs'], { env: { TRIBUTARY_STATE_DIR: dir, NATS_URL: 'nats://ops:hunter2@127.0.0.1:1' } });
  expect(inUrl.stderr).toBe(
    'tributary: no NATS server at nats://ops:***@127.0.0.1:1; start a local cluster with `tributary up` or set NATS_URL\n',
  );
});

test('cli - recordio inspect --json describes every chunk and the totals', async () => {
  const result = await run(['recordio', 'inspect', '--json', join(dir, 'data-*.recordio')]);
  expect(result.code).toBe(0);
  const report = JSON.parse(result.stdout) as InspectReport;
  expect(report.files.map((f) => f.file)).toEqual([fileA, fileB]);
  // maxChunkSizeBytes 12: "Hello" + "" + "World!" = 11 bytes, then the 50-byte record alone.
  expect(report.files[0]!.chunks.map((c) => [c.offset, c.compressor, c.records])).toEqual([
    [0, 'snappy', 3],
    [expect.any(Number), 'snappy', 1],
  ]);
  expect(report.files[1]!.chunks.map((c) => [c.offset, c.compressor, c.records])).toEqual([[0, 'gzip', 1]]);
  const compressed = report.files.flatMap((f) => f.chunks).reduce((n, c) => n + c.compressedBytes, 0);
  expect(report.totals).toEqual({
    files: 2,
    chunks: 3,
    records: 5,
    compressedBytes: compressed,
    fileBytes: report.files[0]!.sizeBytes + report.files[1]!.sizeBytes,
    compressors: ['gzip', 'snappy'],
  });
  expect(report.totals.fileBytes).toBe(compressed + 3 * 20);
});

test('cli - recordio inspect prints a table per file', async () => {
  const result = await run(['recordio', 'inspect', fileA]);
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(/data-a\.recordio: 2 chunks, 4 records/);
  expect(result.stdout).toMatch(/offset\s+compressor\s+records\s+compressed bytes/);
  expect(result.stdout).toMatch(/total: 1 files, 2 chunks, 4 records, .* compressors: snappy/);
});

test('cli - recordio cat --sha256 prints one digest a record, files in sorted order', async () => {
  const result = await run(['recordio', 'cat', '--sha256', join(dir, 'data-*.recordio')]);
  expect(result.code).toBe(0);
  const expected = [...RECORDS_A, ...RECORDS_B].map((r) => createHash('sha256').update(r).digest('hex'));
  expect(result.stdout).toBe(expected.join('\n') + '\n');
});

test('cli - recordio cat prints each record in hex', async () => {
  const result = await run(['recordio', 'cat', fileB, fileA]);
  expect(result.code).toBe(0);
  expect(result.stdout.split('\n')).toEqual([
    ...[...RECORDS_A, ...RECORDS_B].map((r) => Buffer.from(r).toString('hex')),
    '',
  ]);
});

test('cli - recordio cat stops quietly when the reader goes away', async () => {
  const big = join(dir, 'big.recordio');
  const writer = await RecordWriter.open(big, { compressor: Compressor.None });
  for (let i = 0; i < 20_000; i++) await writer.write(new Uint8Array(16).fill(i % 256));
  await writer.close();
  let writes = 0;
  const stdout = new Writable({
    highWaterMark: 1024,
    write(_chunk, _encoding, done) {
      writes++;
      if (writes === 1) done();
      else done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
    },
  });
  stdout.on('error', () => undefined);
  const stderr = new Capture();
  const code = await main(['recordio', 'cat', big], { stdout, stderr, env: {} });
  expect(code).toBe(0);
  expect(stderr.text).toBe('');
  expect(writes).toBeLessThan(5);
});

test('cli - dataset convert idx writes shards and a summary', async () => {
  const count = 2500;
  const images = join(dir, 'img.gz');
  const labels = join(dir, 'lab');
  await writeFile(
    images,
    gzipSync(
      encodeIdx(
        'ubyte',
        [count, 2, 2],
        new Uint8Array(count * 4).map((_, i) => i % 251),
      ),
    ),
  );
  await writeFile(
    labels,
    encodeIdx(
      'ubyte',
      [count],
      new Uint8Array(count).map((_, i) => i % 10),
    ),
  );
  const out = join(dir, 'idx-out', 'ds');
  // 20-byte records, 50 a chunk: 50 chunks in files of 16.
  const result = await run(
    [
      'dataset',
      'convert',
      'idx',
      '--images',
      images,
      '--labels',
      labels,
      '--out',
      out,
      '--chunk-size',
      '1000',
      '--chunks-per-file',
      '16',
      '--compressor',
      'none',
    ],
    { tty: true },
  );
  expect(result.stderr).toContain(`\r\u001b[K${out}: 1,000/2,500 records (40%)`);
  expect(result.stderr).toMatch(/: 2,500\/2,500 records \(100%\)\n$/);
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(/split\s+files\s+records\s+chunks\s+bytes/);
  expect(result.stdout).toMatch(new RegExp(`${out}\\s+4\\s+2,500\\s+50\\s+`));
  expect((await readdir(join(dir, 'idx-out'))).sort()).toEqual([0, 1, 2, 3].map((i) => `ds-0000${i}.recordio`));
});

test('cli - dataset convert fashion-mnist reads the four files of --source', async () => {
  const source = join(dir, 'fm-source');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(source);
  const write = (name: string, bytes: Uint8Array): Promise<void> => writeFile(join(source, name), gzipSync(bytes));
  await write('train-images-idx3-ubyte.gz', encodeIdx('ubyte', [30, 28, 28], new Uint8Array(30 * 784).fill(7)));
  await write('train-labels-idx1-ubyte.gz', encodeIdx('ubyte', [30], new Uint8Array(30).fill(3)));
  await write('t10k-images-idx3-ubyte.gz', encodeIdx('ubyte', [10, 28, 28], new Uint8Array(10 * 784).fill(9)));
  await write('t10k-labels-idx1-ubyte.gz', encodeIdx('ubyte', [10], new Uint8Array(10).fill(1)));
  const out = join(dir, 'fm-out');
  const result = await run([
    'dataset',
    'convert',
    'fashion-mnist',
    '--source',
    source,
    '--out',
    out,
    '--chunk-size',
    '8000',
  ]);
  expect(result.code).toBe(0);
  expect(result.stderr).toBe('train: 30/30 records (100%)\ntest: 10/10 records (100%)\n');
  expect(result.stdout).toMatch(/train\s+1\s+30\s+3\s+/);
  expect(result.stdout).toMatch(/test\s+1\s+10\s+1\s+/);
  const first = await scanRecords(join(out, 'train-00000.recordio')).next();
  const example = decodeExample(first.value as Uint8Array);
  expect(example.shape).toEqual([28, 28]);
  expect(example.label).toBe(3);
});

test('cli - dataset convert csv takes the file, the label column and the label type', async () => {
  const input = join(dir, 'table.csv');
  await writeFile(input, 'f1,target,f2\n1,2,3\n4,5,6\n');
  const out = join(dir, 'csv-out', 'table');
  const result = await run([
    'dataset',
    'convert',
    'csv',
    input,
    '--out',
    out,
    '--label-column',
    'target',
    '--label-type',
    'float32',
  ]);
  expect(result.code).toBe(0);
  const examples = [];
  for await (const r of scanRecords(`${out}-00000.recordio`)) examples.push(decodeExample(r));
  expect(examples.map((e) => [Array.from(e.features), e.labelDtype, e.label])).toEqual([
    [[1, 3], 'float32', 2],
    [[4, 6], 'float32', 5],
  ]);
  const bad = await run(['dataset', 'convert', 'csv', input, '--out', out, '--label-column', 'nope']);
  expect(bad.code).toBe(1);
  expect(bad.stderr).toBe(`tributary: ${input}:1: label column "nope" is not in the header\n`);
});
