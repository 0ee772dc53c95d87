import { stepHyperparams, type ShardJobSettings } from './job-settings.js';
import type { ShardParam, ShardParameters } from './shard-parameters.js';

/**
 * Where a gradient is applied: one step of the job's optimizer over every parameter of the
 * shard, with the learning rate the job's schedule gives at the current version, after which
 * the version is one higher. `gradients` holds one averaged gradient per parameter, already
 * checked (`push-validation.ts`); without gradients (a recovery step nobody pushed to, see
 * `shard-recovery.ts`, or a bounded-staleness version every trainer moved past) only the
 * version advances. `learningRateScale` multiplies the learning rate of this step alone (a
 * staleness-aware asynchronous push). The kernels write each parameter's new values
 * into a fresh array of the kernel backend instead of into the current one, so snapshots and
 * pulls in flight keep the old values (see `shard-parameters.ts` for when the old arrays are
 * reused); the optimizer state is updated in place. Returns the new version.
 */
export function takeStep(
  params: ShardParameters,
  gradients: ReadonlyMap<string, Float32Array> | undefined,
  settings: Pick<ShardJobSettings, 'kernel' | 'hyper' | 'schedule'>,
  learningRateScale = 1,
): number {
  const { kernel } = settings;
  const scheduled = stepHyperparams(settings, params.version);
  const hyper =
    learningRateScale === 1 ? scheduled : { ...scheduled, learningRate: scheduled.learningRate * learningRateScale };
  const step = params.version + 1;
  return replaceAll(params, gradients, (out, p, g) =>
    params.kernels.update(kernel, out, p.value, g, p.state, hyper, step),
  );
}

/**
 * Where a parameter delta is applied (`local` mode): every parameter of the shard becomes
 * `value + scale * delta`, computed in float64 and rounded once, and the version is one higher.
 * `deltas` holds one delta per parameter, already checked; without deltas only the version
 * advances. The new values go into fresh arrays, as with `takeStep`. Returns the new version.
 */
export function addDeltas(
  params: ShardParameters,
  deltas: ReadonlyMap<string, Float32Array> | undefined,
  scale: number,
): number {
  return replaceAll(params, deltas, (out, p, d) => params.kernels.addScaled(out, p.value, d, scale));
}

/** Writes every parameter's next values with `write` into fresh arrays, then installs them. */
function replaceAll(
  params: ShardParameters,
  updates: ReadonlyMap<string, Float32Array> | undefined,
  write: (out: Float32Array, param: ShardParam, update: Float32Array) => void,
): number {
  const step = params.version + 1;
  if (!updates) {
    params.advanceTo(step);
    return step;
  }
  const { kernels } = params;
  const next = params.all.map((p) => kernels.allocate(p.value.length));
  try {
    params.all.forEach((p, i) => write(next[i]!, p, updates.get(p.name)!));
  } catch (err) {
    for (const a of next) kernels.free(a);
    throw err;
  }
  params.replaceValues(next, step);
  return step;
}
