import { stepHyperparams, type ShardJobSettings } from './job-settings.js';
import type { ShardParameters } from './shard-parameters.js';

/**
 * Where a gradient is applied: one step of the job's optimizer over every parameter of the
 * shard, with the learning rate the job's schedule gives at the current version, after which
 * the version is one higher. `gradients` holds one averaged gradient per parameter, already
 * checked (`push-validation.ts`); without gradients (a recovery step nobody pushed to, see
 * `shard-recovery.ts`) only the version advances. The kernels write each parameter's new values
 * into a fresh array of the kernel backend instead of into the current one, so snapshots and
 * pulls in flight keep the old values (see `shard-parameters.ts` for when the old arrays are
 * reused); the optimizer state is updated in place. Returns the new version.
 */
export function takeStep(
  params: ShardParameters,
  gradients: ReadonlyMap<string, Float32Array> | undefined,
  settings: Pick<ShardJobSettings, 'kernel' | 'hyper' | 'schedule'>,
): number {
  const { kernel } = settings;
  const step = params.version + 1;
  const hyper = stepHyperparams(settings, params.version);
  if (!gradients) {
    params.advanceTo(step);
    return step;
  }
  const { kernels } = params;
  const next = params.all.map((p) => kernels.allocate(p.value.length));
  try {
    params.all.forEach((p, i) =>
      kernels.update(kernel, next[i], p.value, gradients.get(p.name)!, p.state, hyper, step),
    );
  } catch (err) {
    for (const a of next) kernels.free(a);
    throw err;
  }
  params.replaceValues(next, step);
  return step;
}
