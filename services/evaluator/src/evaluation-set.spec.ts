import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeExampleValues as encodeRecord } from '#libs/dataset';
import { ChecksumMismatchError, Compressor, NoMatchingFilesError, writeRecordFile } from '#libs/recordio';
import { EvaluationSetError } from './errors.js';
import { EvaluationSetCache, loadEvaluationSet, type EvaluationSetSpec } from './evaluation-set.js';

const LAYOUT = {
  featureShape: [2],
  featureDtype: 'float32' as const,
  scale: 0.5,
  labelDtype: 'int32' as const,
  numClasses: 3,
};

function record(i: number): Uint8Array {
  return encodeRecord([i, -i], i % 3, { featureShape: [2], featureDtype: 'float32', labelDtype: 'int32' });
}

function specFor(
  dir: string,
  patterns: string[],
  evaluation: Partial<EvaluationSetSpec['evaluation']> = {},
): EvaluationSetSpec {
  return {
    id: 'eval-set-job',
    dataset: { train: [], eval: patterns.map((p) => join(dir, p)), layout: LAYOUT },
    evaluation: { everySteps: 1, metric: 'accuracy', batchSize: 2, ...evaluation },
  };
}

describe('evaluation set', () => {
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tributary-eval-set-'));
    // 3 records per chunk (two chunks per file), files read in sorted order.
    const options = { maxChunkSizeBytes: 3 * record(0).length, compressor: Compressor.None };
    await writeRecordFile(join(dir, 'eval-000.rio'), [0, 1, 2, 3, 4, 5].map(record), options);
    await writeRecordFile(join(dir, 'eval-001.rio'), [6, 7, 8].map(record), options);
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('evaluation set - reads files in order up to maxExamples, in batches of batchSize', async () => {
    const set = await loadEvaluationSet(specFor(dir, ['eval-*.rio'], { maxExamples: 7 }));
    expect(set.examples).toBe(7);
    expect(set.batches.map((b) => b.size)).toEqual([2, 2, 2, 1]);
    expect(Array.from(set.batches[3]!.features)).toEqual([3, -3]);
    expect(Array.from(set.batches[3]!.labels)).toEqual([0]);
    expect(set.files.map((f) => f.slice(dir.length + 1))).toEqual(['eval-000.rio', 'eval-001.rio']);
  });

  it('evaluation set - without maxExamples every record is used', async () => {
    const set = await loadEvaluationSet(specFor(dir, ['eval-001.rio', 'eval-000.rio'], { batchSize: 4 }));
    expect(set.examples).toBe(9);
    expect(set.batches.map((b) => b.size)).toEqual([4, 4, 1]);
  });

  it('evaluation set - a missing file is an EvaluationSetError naming the job', async () => {
    const err = await loadEvaluationSet(specFor(dir, ['missing-*.rio'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvaluationSetError);
    expect((err as Error).message).toContain('eval-set-job');
    expect((err as Error).cause).toBeInstanceOf(NoMatchingFilesError);
  });

  it('evaluation set - a corrupt chunk is an EvaluationSetError and is not cached', async () => {
    const bad = join(dir, 'bad.rio');
    const bytes = readFileSync(join(dir, 'eval-000.rio'));
    bytes[30] = bytes[30]! ^ 0xff;
    writeFileSync(bad, bytes);
    const cache = new EvaluationSetCache();
    const spec = specFor(dir, ['bad.rio']);
    const err = await cache.get(spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EvaluationSetError);
    expect((err as Error).cause).toBeInstanceOf(ChecksumMismatchError);
    writeFileSync(bad, readFileSync(join(dir, 'eval-000.rio')));
    await expect(cache.get(spec)).resolves.toMatchObject({ examples: 6 });
    expect(cache.get(spec)).toBe(cache.get(spec));
  });
});
