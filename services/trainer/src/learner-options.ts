import type { JobSpec } from '#libs/job-spec';
import { localOptimizerFor, type TfjsLearnerOptions } from '#libs/learner';

/**
 * How a job's learner turns minibatches into updates: in `local` mode it steps its own copy with
 * the job's optimizer (plain SGD for `sgd`) at `optimizer.learningRate` and hands back the
 * parameter delta; in every other mode it hands back the gradient.
 */
export function learnerOptions(spec: Pick<JobSpec, 'training' | 'optimizer'>): TfjsLearnerOptions {
  if (spec.training.mode !== 'local') return { mode: 'gradient' };
  return {
    mode: 'delta',
    localLearningRate: spec.optimizer.learningRate,
    localOptimizer: () => localOptimizerFor(spec.optimizer),
  };
}
