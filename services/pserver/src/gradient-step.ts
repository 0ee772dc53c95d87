import type { ShardJobSettings } from './job-settings.js';
import type { ShardParameters } from './shard-parameters.js';

/**
 * Where a gradient is applied: one step of the job's optimizer over every parameter of the
 * shard, after which the version is one higher. `gradients` holds one averaged gradient per
 * parameter, already checked (`push-validation.ts`); without gradients (a recovery step nobody
 * pushed to, see `shard-recovery.ts`) only the version advances. Each parameter gets a new
 * array rather than being written into, so snapshots and pulls in flight keep the old values.
 * Returns the new version.
 */
export function takeStep(
  params: ShardParameters,
  gradients: ReadonlyMap<string, Float32Array> | undefined,
  settings: Pick<ShardJobSettings, 'kernel' | 'hyper'>,
): number {
  const { kernel, hyper } = settings;
  const step = params.version + 1;
  if (gradients) {
    for (const p of params.all) {
      const next = p.value.slice();
      kernel.apply(next, gradients.get(p.name)!, p.state, hyper, step);
      p.value = next;
    }
  }
  params.advanceTo(step);
  return step;
}
