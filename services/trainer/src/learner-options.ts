import type { JobSpec } from '#libs/job-spec';
import type { TfjsLearnerOptions } from '#libs/learner';

/**
 * How a job's learner turns minibatches into updates: in `local` mode it takes plain SGD steps
 * at `optimizer.learningRate` and hands back the parameter delta; in every other mode it hands
 * back the gradient.
 */
export function learnerOptions(spec: Pick<JobSpec, 'training' | 'optimizer'>): TfjsLearnerOptions {
  if (spec.training.mode !== 'local') return { mode: 'gradient' };
  return { mode: 'delta', localLearningRate: spec.optimizer.learningRate };
}
