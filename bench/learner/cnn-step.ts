/**
 * `cnn-step`: samples/s of the small CNN's learner step (`train` + `getUpdate`, as in
 * `train-step`) on the wasm backend with our WebAssembly SIMD kernels, against the same step with
 * the plain JavaScript kernels (and the backend's own `Conv2DBackpropInput` and transposed
 * `BatchMatMul`), both measured in this run in alternating rounds; each path's figure is its best
 * round, as other load on the machine only ever slows a round down. The detail gives the median
 * milliseconds per step in each kernel on both paths, from `tf.profile`.
 */
import * as tf from '@tensorflow/tfjs';
import { selectBackend, selectWasmKernels, TfjsLearner, type KernelPath } from '#libs/learner';
import { benchResult, median, round, type BenchResult } from '../bench-result.js';
import { measure, randomBatch, WORKLOADS, type Workload } from './train-step.js';

/** Each path is measured this long per round, after its warm-up, in ROUNDS alternating rounds. */
const ROUND_SECONDS = 2.5;
const ROUNDS = 3;
/** Steps profiled one by one per path for the kernel breakdown. */
const PROFILE_STEPS = 9;
/** Kernels under this many ms per step on both paths are summed as "other kernels". */
const SHOWN_KERNEL_MS = 0.3;
/** Target: the SIMD kernels at least double the step's throughput. */
const TARGET_RATIO = 2;

const CNN: Workload = WORKLOADS.find((w) => 'preset' in w.spec.model && w.spec.model.preset === 'cnn')!;

/** The median over PROFILE_STEPS steps of the milliseconds each kernel takes in one step. */
async function kernelMsPerStep(workload: Workload): Promise<Map<string, number>> {
  const learner = new TfjsLearner();
  await learner.initialize(workload.spec);
  const params = await learner.getParams();
  const batch = randomBatch(
    workload.batchSize,
    workload.spec.layout.featureShape.reduce((a, b) => a * b, 1),
  );
  const step = async (): Promise<void> => {
    learner.setParams(params);
    await learner.train(batch);
    learner.getUpdate();
  };
  await step();
  // Reading back every kernel's output to look for NaNs would be timed into the kernels after it.
  const checking = tf.env().getBool('CHECK_COMPUTATION_FOR_ERRORS');
  tf.env().set('CHECK_COMPUTATION_FOR_ERRORS', false);
  const steps: Map<string, number>[] = [];
  try {
    for (let i = 0; i < PROFILE_STEPS; i++) {
      const profile = await tf.profile(step);
      const perKernel = new Map<string, number>();
      for (const kernel of profile.kernels) {
        // Op scopes (`name__op`) also show up, their time already counted in their kernels.
        if (tf.getKernel(kernel.name, 'wasm') === undefined) continue;
        perKernel.set(kernel.name, (perKernel.get(kernel.name) ?? 0) + (kernel.kernelTimeMs as number));
      }
      steps.push(perKernel);
    }
  } finally {
    tf.env().set('CHECK_COMPUTATION_FOR_ERRORS', checking);
    learner.shutdown();
  }
  const names = new Set(steps.flatMap((m) => [...m.keys()]));
  return new Map([...names].map((name) => [name, median(steps.map((m) => m.get(name) ?? 0))]));
}

/** `name simd | js` per kernel worth showing, then the rest and the totals, in ms per step. */
function breakdown(simd: Map<string, number>, js: Map<string, number>, stepMs: Record<KernelPath, number>): string {
  const names = [...new Set([...simd.keys(), ...js.keys()])].sort((a, b) => (js.get(b) ?? 0) - (js.get(a) ?? 0));
  const shown = names.filter((n) => Math.max(simd.get(n) ?? 0, js.get(n) ?? 0) >= SHOWN_KERNEL_MS);
  const sum = (m: Map<string, number>, of: string[]): number => of.reduce((t, n) => t + (m.get(n) ?? 0), 0);
  const rest = names.filter((n) => !shown.includes(n));
  const pair = (a: number, b: number): string => `${a.toFixed(2)} | ${b.toFixed(2)}`;
  return [
    ...shown.map((n) => `${n} ${pair(simd.get(n) ?? 0, js.get(n) ?? 0)}`),
    `other kernels ${pair(sum(simd, rest), sum(js, rest))}`,
    `all kernels ${pair(sum(simd, names), sum(js, names))}`,
    `whole step ${pair(stepMs['wasm-simd'], stepMs.js)}`,
  ].join(', ');
}

export async function runCnnStepBench(say: (line: string) => void): Promise<BenchResult[]> {
  await selectBackend('wasm');
  const best: Record<KernelPath, { samplesPerSecond: number; msPerStep: number }> = {
    'wasm-simd': { samplesPerSecond: 0, msPerStep: 0 },
    js: { samplesPerSecond: 0, msPerStep: 0 },
  };
  for (let round = 0; round < ROUNDS; round++) {
    for (const path of ['js', 'wasm-simd'] as const) {
      const chosen = selectWasmKernels(path);
      if (chosen.path !== path) throw new Error(`the ${path} kernels cannot run here: ${chosen.reason}`);
      const r = await measure(CNN, ROUND_SECONDS);
      if (r.samplesPerSecond > best[path].samplesPerSecond) best[path] = r;
      say(`round ${round + 1}, ${path} kernels: ${Math.round(r.samplesPerSecond)} samples/s`);
    }
  }
  say('profiling the kernels of both paths');
  selectWasmKernels('js');
  const js = await kernelMsPerStep(CNN);
  selectWasmKernels('wasm-simd');
  const simd = await kernelMsPerStep(CNN);
  return [
    benchResult({
      name: `cnn-step: ${CNN.label} on wasm, our SIMD kernels vs the plain JS kernels`,
      figure: round(best['wasm-simd'].samplesPerSecond),
      unit: 'samples/s',
      baseline: round(best.js.samplesPerSecond),
      target: TARGET_RATIO,
      detail:
        `ms per step, SIMD | JS: ` +
        breakdown(simd, js, { 'wasm-simd': best['wasm-simd'].msPerStep, js: best.js.msPerStep }),
    }),
  ];
}
