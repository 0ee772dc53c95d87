import { isRecord } from './field-path.js';
import type { LayersTopology } from './job-spec.js';

/**
 * Finds the layers topology in what a spec's `model.topology` holds: the topology itself
 * (`{ class_name, config }`, as `model.toJSON(null, false)` returns it), or a `model.json`
 * object whose `modelTopology` is the topology or wraps it in `model_config`. Undefined when
 * none of these fits.
 */
export function resolveTopology(value: unknown): LayersTopology | undefined {
  if (isLayersTopology(value)) return value;
  if (!isRecord(value) || !Object.hasOwn(value, 'modelTopology')) return undefined;
  const inner = value['modelTopology'];
  if (isLayersTopology(inner)) return inner;
  if (isRecord(inner) && Object.hasOwn(inner, 'model_config') && isLayersTopology(inner['model_config'])) {
    return inner['model_config'];
  }
  return undefined;
}

function isLayersTopology(value: unknown): value is LayersTopology {
  return (
    isRecord(value) &&
    typeof value['class_name'] === 'string' &&
    value['class_name'] !== '' &&
    Object.hasOwn(value, 'config') &&
    isRecord(value['config'])
  );
}
