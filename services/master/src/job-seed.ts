import { pickJobSeed } from '#libs/data-order';
import type { JobSpec } from '#libs/job-spec';

/**
 * The spec with `training.seed` set: as given, or picked now for a spec that gave none. The
 * intake stores the result with the job, so the job's initial weights and data order stay the
 * same across master failovers, and resubmitting the spec with the reported seed repeats them.
 */
export function withJobSeed(spec: JobSpec, pick: () => number = pickJobSeed): JobSpec {
  if (spec.training.seed !== undefined) return spec;
  return { ...spec, training: { ...spec.training, seed: pick() } };
}
