import type { JobSpec } from '#libs/job-spec';
import { localOptimizerFor, type TfjsLearnerOptions } from '#libs/learner';

/**
 * How a job's learner turns minibatches into updates: in `local` mode it steps its own copy with
 * the job's optimizer (plain SGD for `sgd`) at `optimizer.learningRate` and hands back the
 * parameter delta; in every other mode it hands back the gradient. `say` hears which way the
 * local steps run, once per model the learner builds.
 */
export function learnerOptions(
  spec: Pick<JobSpec, 'training' | 'optimizer'>,
  say?: (line: string) => void,
): TfjsLearnerOptions {
  if (spec.training.mode !== 'local') return { mode: 'gradient' };
  return {
    mode: 'delta',
    localLearningRate: spec.optimizer.learningRate,
    localOptimizer: () => {
      const optimizer = localOptimizerFor(spec.optimizer);
      const reason = optimizer?.reason === undefined ? '' : ` (our kernel passed over: ${optimizer.reason})`;
      say?.(`local steps: ${spec.optimizer.type} by ${LOCAL_PATHS[optimizer?.path ?? 'learner']}${reason}`);
      return optimizer;
    },
  };
}

/** How each way of taking local steps reads in the trainer's log. */
const LOCAL_PATHS = {
  'wasm-simd': 'our SIMD128 kernel on the wasm heap',
  tfjs: "TensorFlow.js's optimizer",
  learner: "the learner's own w -= lr * g",
} as const;
