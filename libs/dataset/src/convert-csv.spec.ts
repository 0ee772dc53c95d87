import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { convertCsv } from './convert-csv.js';
import { readCsvRows } from './csv-reader.js';
import { CsvFormatError } from './errors.js';
import { type LocatedExample, readExamples } from './read-examples.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tributary-csv-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

let counter = 0;
async function csvFile(text: string): Promise<string> {
  const file = join(dir, `input${counter++}.csv`);
  await writeFile(file, text);
  return file;
}

async function collect(files: readonly string[]): Promise<LocatedExample[]> {
  const examples: LocatedExample[] = [];
  for await (const e of readExamples(files)) examples.push(e);
  return examples;
}

test('csv - all columns but the last are float32 features, integer labels are int32', async () => {
  const input = await csvFile('a,b,c,label\n1,2.5,-3,0\n4,5e-1,6,1\n\n7,8,9,2\n');
  const summary = await convertCsv({ input, outPrefix: join(dir, 'out', 'basic') });
  expect(summary.records).toBe(3);
  const examples = await collect(summary.files);
  expect(examples.map((e) => [e.featureDtype, e.shape, Array.from(e.features), e.labelDtype, e.label])).toEqual([
    ['float32', [3], [1, 2.5, -3], 'int32', 0],
    ['float32', [3], [4, 0.5, 6], 'int32', 1],
    ['float32', [3], [7, 8, 9], 'int32', 2],
  ]);
});

test('csv - a non-integer label makes every label float32, unless int32 is asked for', async () => {
  const input = await csvFile('x,y\n1,0.5\n2,3\n');
  const summary = await convertCsv({ input, outPrefix: join(dir, 'out', 'float-label') });
  const examples = await collect(summary.files);
  expect(examples.map((e) => [e.labelDtype, e.label])).toEqual([
    ['float32', 0.5],
    ['float32', 3],
  ]);
  await expect(convertCsv({ input, outPrefix: join(dir, 'out', 'forced'), labelType: 'int32' })).rejects.toThrow(
    /:2: column 2 \("y"\): label "0.5" is not an int32/,
  );
  const forced = await convertCsv({
    input: await csvFile('x,y\n1,2\n'),
    outPrefix: join(dir, 'out', 'forced-float'),
    labelType: 'float32',
  });
  expect((await collect(forced.files))[0]!.labelDtype).toBe('float32');
});

test('csv - label and feature columns can be chosen by name, with quoted and CRLF input', async () => {
  const input = await csvFile('"id","class",w,"h ""cm"""\r\n1,3,"10",20\r\n2,4,11,"21"\r\n');
  const summary = await convertCsv({
    input,
    labelColumn: 'class',
    featureColumns: ['h "cm"', 'w'],
    outPrefix: join(dir, 'out', 'named'),
  });
  const examples = await collect(summary.files);
  expect(examples.map((e) => [Array.from(e.features), e.label])).toEqual([
    [[20, 10], 3],
    [[21, 11], 4],
  ]);
});

test('csv - a non-numeric cell is refused naming the line and column', async () => {
  const input = await csvFile('a,b,label\n1,2,0\n3,abc,1\n');
  const run = convertCsv({ input, outPrefix: join(dir, 'out', 'bad') });
  await expect(run).rejects.toThrow(CsvFormatError);
  await expect(convertCsv({ input, outPrefix: join(dir, 'out', 'bad') })).rejects.toThrow(
    `${input}:3: column 2 ("b"): "abc" is not a number`,
  );
  const emptyCell = await csvFile('a,label\n,1\n');
  await expect(convertCsv({ input: emptyCell, outPrefix: join(dir, 'out', 'bad2') })).rejects.toThrow(
    /:2: column 1 \("a"\): "" is not a number/,
  );
});

test('csv - rows of the wrong width, unknown columns and empty files are refused', async () => {
  const ragged = await csvFile('a,b\n1,2\n3\n');
  await expect(convertCsv({ input: ragged, outPrefix: join(dir, 'out', 'r') })).rejects.toThrow(
    /:3: expected 2 columns like the header, got 1/,
  );
  const ok = await csvFile('a,b\n1,2\n');
  await expect(convertCsv({ input: ok, labelColumn: 'z', outPrefix: join(dir, 'out', 'r') })).rejects.toThrow(
    /label column "z" is not in the header/,
  );
  await expect(
    convertCsv({ input: ok, featureColumns: ['b'], labelColumn: 'b', outPrefix: join(dir, 'out', 'r') }),
  ).rejects.toThrow(/both label and feature/);
  await expect(convertCsv({ input: await csvFile(''), outPrefix: join(dir, 'out', 'r') })).rejects.toThrow(
    /header row is required/,
  );
  await expect(convertCsv({ input: await csvFile('a,b\n"1,2\n'), outPrefix: join(dir, 'out', 'r') })).rejects.toThrow(
    /:2: quoted field is not closed/,
  );
});

test('csv - rows read back as written, whatever the quoting', async () => {
  const cellArb = fc.string({ unit: fc.constantFrom('a', '1', ',', '"', '\n', ' ', 'é'), maxLength: 6 });
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(cellArb, { minLength: 2, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
      async (rows) => {
        const quote = (cell: string): string => `"${cell.replaceAll('"', '""')}"`;
        const text = rows.map((r) => r.map(quote).join(',')).join('\n');
        const read: string[][] = [];
        for await (const row of readCsvRows(await csvFile(text))) read.push(row.cells);
        expect(read).toEqual(rows);
      },
    ),
    { numRuns: 50 },
  );
});
