/**
 * `clone`: samples/s of the learner step (`train` + `getUpdate`, as in `train-step`) of the MLP
 * and the CNN on the wasm backend with our `Identity` kernel, which shares a cloned tensor's
 * memory, against the same step with the wasm build's own, which copies it (TF.js clones every
 * tensor a kernel saves for its gradient). Both are measured in this run, in one process, in
 * pairs of short rounds that take turns going first; the ratio is the median of the pairs' ratios
 * (this machine's speed drifts within a minute more than the difference), the figures the
 * medians of the rounds.
 */
import * as tf from '@tensorflow/tfjs';
import { Identity, type KernelConfig, type KernelFunc, type TensorInfo } from '@tensorflow/tfjs';
import { selectBackend, WASM_REPLACED_KERNELS } from '#libs/learner';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { measure, WORKLOADS } from './train-step.js';

const ROUND_SECONDS = 0.6;
const PAIRS = 16;
/** Target: sharing is no slower than copying. */
const TARGET_RATIO = 1;

/** What the copy needs of the wasm backend. */
interface WasmBackend {
  makeOutput(shape: number[], dtype: TensorInfo['dtype']): TensorInfo;
  typedArrayFromHeap(info: TensorInfo): Float32Array | Int32Array | Uint8Array;
}

/** The wasm build's own Identity: a new output, and the input's values copied into it. */
function copyingIdentity({ inputs, backend }: { inputs: { x: TensorInfo }; backend: WasmBackend }): TensorInfo {
  const { x } = inputs;
  const out = backend.makeOutput([...x.shape], x.dtype);
  backend.typedArrayFromHeap(out).set(backend.typedArrayFromHeap(x));
  return out;
}

const COPYING: KernelConfig = {
  kernelName: Identity,
  backendName: 'wasm',
  kernelFunc: copyingIdentity as unknown as KernelFunc,
};

function useIdentity(config: KernelConfig): void {
  tf.unregisterKernel(Identity, 'wasm');
  tf.registerKernel(config);
}

export async function runCloneStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const sharing = WASM_REPLACED_KERNELS.find((k) => k.kernelName === Identity);
  if (sharing === undefined || tf.getKernel(Identity, 'wasm') !== sharing) {
    throw new Error('our Identity kernel is not registered for wasm');
  }
  const results: BenchResult[] = [];
  try {
    for (const workload of WORKLOADS) {
      const rounds = { copy: [] as number[], share: [] as number[] };
      for (let pair = 0; pair < PAIRS; pair++) {
        const order = [
          ['copy', COPYING],
          ['share', sharing],
        ] as const;
        for (const [path, config] of pair % 2 === 0 ? order : [...order].reverse()) {
          useIdentity(config);
          rounds[path].push((await measure(workload, ROUND_SECONDS)).samplesPerSecond);
        }
        say(
          `${workload.label}, pair ${pair + 1}: copy ${Math.round(rounds.copy[pair]!)}, ` +
            `share ${Math.round(rounds.share[pair]!)} samples/s`,
        );
      }
      const ratios = rounds.share.map((share, i) => share / rounds.copy[i]!);
      results.push(
        benchResult({
          name: `clone: ${workload.label} on wasm, Identity sharing memory vs copying it`,
          figure: round(median(rounds.share)),
          unit: 'samples/s',
          baseline: round(median(rounds.copy)),
          ratio: median(ratios),
          target: TARGET_RATIO,
          detail:
            `ratio = median of ${PAIRS} paired rounds of ${ROUND_SECONDS} s ` +
            `(pairs from ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}); figures = medians of the rounds`,
        }),
      );
    }
  } finally {
    useIdentity(sharing);
  }
  return results;
}
