import { RecordLayoutError } from './errors.js';
import type { Batch } from './learner.js';
import type { RecordLayout } from './model-spec.js';
import { parseExampleHeader } from '#libs/dataset';

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Scratch for reinterpreting 4 label bytes as a float32. */
const labelBytes = new Uint8Array(4);
const labelFloat = new Float32Array(labelBytes.buffer);

/**
 * Multiplies `count` elements of `values` from `at` by `scale`. Kept apart so that V8 optimises
 * the loop on its own: with a record's bytes first converted by `Float32Array.set`, a chunk of
 * 1,000 Fashion-MNIST records took 0.6 ms against 1.3 to 1.7 ms converted and scaled element by
 * element.
 */
function scaleInPlace(values: Float32Array, at: number, count: number, scale: number): void {
  for (let i = at, end = at + count; i < end; i++) values[i]! *= scale;
}

/**
 * Decodes example records (the layout of `#libs/dataset`) into one {@link Batch}: features in a single Float32Array,
 * multiplied by `layout.scale`, and labels as Int32Array or Float32Array per `layout.labelDtype`.
 * Each record's dtypes and element count must match the layout (its dims may differ, e.g.
 * `[784]` records for a `[28, 28, 1]` layout).
 *
 * @throws RecordLayoutError naming the record and the field that does not match.
 */
export function decodeBatch(records: readonly Uint8Array[], layout: RecordLayout): Batch {
  const size = records.length;
  const perExample = layout.featureShape.reduce((a, b) => a * b, 1);
  const features = new Float32Array(size * perExample);
  const labels = layout.labelDtype === 'int32' ? new Int32Array(size) : new Float32Array(size);
  const featureBytes = new Uint8Array(features.buffer);
  const scale = layout.scale;
  for (let r = 0; r < size; r++) {
    const record = records[r]!;
    const where = `record ${r} of the batch`;
    const header = parseExampleHeader(record, where);
    if (header.featureDtype !== layout.featureDtype) {
      throw new RecordLayoutError(
        `${where} has ${header.featureDtype} features, the layout says ${layout.featureDtype}`,
      );
    }
    if (header.labelDtype !== layout.labelDtype) {
      throw new RecordLayoutError(`${where} has a ${header.labelDtype} label, the layout says ${layout.labelDtype}`);
    }
    if (header.featureCount !== perExample) {
      throw new RecordLayoutError(
        `${where} has dims [${header.shape.join(', ')}] (${header.featureCount} elements), the layout's featureShape [${layout.featureShape.join(', ')}] has ${perExample}`,
      );
    }
    const base = r * perExample;
    const start = header.featuresOffset;
    if (header.featureDtype === 'uint8') {
      features.set(record.subarray(start, start + perExample), base);
      if (scale !== 1) scaleInPlace(features, base, perExample, scale);
    } else if (LITTLE_ENDIAN_HOST) {
      featureBytes.set(record.subarray(start, start + 4 * perExample), 4 * base);
      if (scale !== 1) scaleInPlace(features, base, perExample, scale);
    } else {
      const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
      for (let i = 0; i < perExample; i++) features[base + i] = view.getFloat32(start + 4 * i, true) * scale;
    }
    const at = header.labelOffset;
    if (labels instanceof Int32Array) {
      labels[r] = record[at]! | (record[at + 1]! << 8) | (record[at + 2]! << 16) | (record[at + 3]! << 24);
    } else if (LITTLE_ENDIAN_HOST) {
      labelBytes.set(record.subarray(at, at + 4));
      labels[r] = labelFloat[0]!;
    } else {
      labels[r] = new DataView(record.buffer, record.byteOffset, record.byteLength).getFloat32(at, true);
    }
  }
  return { features, labels, size };
}
