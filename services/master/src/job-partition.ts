import type { JobSpec } from '#libs/job-spec';

/**
 * Fewest elements in a block of a cut parameter when a submitted job does not say
 * (`pservers.partition.minElements`), as PaddlePaddle's parameter blocks: on two shards the
 * example MLP's first kernel (100,352 values) is cut in two, its other parameters stay whole.
 */
export const DEFAULT_PARTITION_MIN_ELEMENTS = 8192;

/**
 * The spec with `pservers.partition` set: as given, or the default for a spec that gave none.
 * The intake stores the result with the job. Set here rather than as a schema default, so that
 * a job stored before parameters were cut, read again after an upgrade, keeps them whole as its
 * parameter servers' checkpoints hold them.
 */
export function withPartition(spec: JobSpec): JobSpec {
  if (spec.pservers.partition !== undefined) return spec;
  return { ...spec, pservers: { ...spec.pservers, partition: { minElements: DEFAULT_PARTITION_MIN_ELEMENTS } } };
}
