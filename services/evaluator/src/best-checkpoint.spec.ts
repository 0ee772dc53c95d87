import fc from 'fast-check';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PlainTensor } from '#libs/learner';
import {
  BEST_DIR,
  BEST_STATE_FILE,
  BestCheckpointError,
  loadBestCheckpoint,
  removeBestCheckpoint,
  saveBestCheckpoint,
  type BestCheckpoint,
} from './best-checkpoint.js';

const tensorArb: fc.Arbitrary<PlainTensor> = fc.oneof(
  fc
    .array(fc.float({ noNaN: true }), { maxLength: 40 })
    .map((v) => ({ name: 'w', dtype: 'float32' as const, shape: [v.length], data: Float32Array.from(v) })),
  fc
    .array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 20 })
    .map((v) => ({ name: 'i', dtype: 'int32' as const, shape: [v.length], data: Int32Array.from(v) })),
  fc
    .array(fc.integer({ min: 0, max: 1 }), { maxLength: 20 })
    .map((v) => ({ name: 'b', dtype: 'bool' as const, shape: [1, v.length], data: Uint8Array.from(v) })),
);

function checkpoint(params: PlainTensor[], version = 7): BestCheckpoint {
  return {
    jobId: 'job-a',
    startedAt: '2024-01-01T00:00:00.000Z',
    metric: 'accuracy',
    policy: { best: { value: 0.75, version }, evaluationsWithoutImprovement: 2, evaluations: 5 },
    version,
    params,
  };
}

describe('best checkpoint', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'best-checkpoint-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('best checkpoint - parameters and counters round-trip exactly', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(tensorArb, { maxLength: 5 }), async (params) => {
        await saveBestCheckpoint(dir, checkpoint(params));
        const back = await loadBestCheckpoint(dir, 'job-a', '2024-01-01T00:00:00.000Z');
        expect(back).toEqual(checkpoint(params));
      }),
      { numRuns: 30 },
    );
  });

  it('best checkpoint - counters alone keep the last parameters, and older parameter files are removed', async () => {
    const first = [{ name: 'w', dtype: 'float32' as const, shape: [2], data: Float32Array.from([1, 2]) }];
    const second = [{ name: 'w', dtype: 'float32' as const, shape: [2], data: Float32Array.from([3, 4]) }];
    await saveBestCheckpoint(dir, checkpoint(first, 10));
    await saveBestCheckpoint(dir, checkpoint(second, 20));
    const { params: _params, ...counters } = checkpoint(second, 20);
    await saveBestCheckpoint(dir, { ...counters, policy: { ...counters.policy, evaluationsWithoutImprovement: 3 } });
    const back = await loadBestCheckpoint(dir, 'job-a', '2024-01-01T00:00:00.000Z');
    expect(back?.version).toBe(20);
    expect(back?.params?.[0]?.data).toEqual(Float32Array.from([3, 4]));
    expect(back?.policy.evaluationsWithoutImprovement).toBe(3);
    expect(readdirSync(join(dir, BEST_DIR)).sort()).toEqual(['params-20.bin', BEST_STATE_FILE]);
  });

  it('best checkpoint - another run of the job, or none, reads as nothing', async () => {
    expect(await loadBestCheckpoint(dir, 'job-a', 'x')).toBeUndefined();
    await saveBestCheckpoint(dir, checkpoint([]));
    expect(await loadBestCheckpoint(dir, 'job-a', '2025-01-01T00:00:00.000Z')).toBeUndefined();
    expect(await loadBestCheckpoint(dir, 'job-b', '2024-01-01T00:00:00.000Z')).toBeUndefined();
    await removeBestCheckpoint(dir);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('best checkpoint - a truncated or altered parameter file is refused naming the file', async () => {
    const params = [{ name: 'w', dtype: 'float32' as const, shape: [4], data: Float32Array.from([1, 2, 3, 4]) }];
    await saveBestCheckpoint(dir, checkpoint(params));
    const file = join(dir, BEST_DIR, 'params-7.bin');
    const bytes = readFileSync(file);
    writeFileSync(file, bytes.subarray(0, 10));
    await expect(loadBestCheckpoint(dir, 'job-a', '2024-01-01T00:00:00.000Z')).rejects.toThrow(
      /params-7\.bin has 10 bytes, expected 16/,
    );
    bytes[3] ^= 0xff;
    writeFileSync(file, bytes);
    await expect(loadBestCheckpoint(dir, 'job-a', '2024-01-01T00:00:00.000Z')).rejects.toThrow(BestCheckpointError);
    writeFileSync(join(dir, BEST_DIR, BEST_STATE_FILE), '{"jobId": ');
    await expect(loadBestCheckpoint(dir, 'job-a', '2024-01-01T00:00:00.000Z')).rejects.toThrow(/state\.json|JSON/);
  });
});
