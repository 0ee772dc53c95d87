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
 * the loop on its own: with the bytes first converted by `Float32Array.set`, a chunk of 1,000
 * Fashion-MNIST records took 0.6 ms against 1.3 to 1.7 ms converted and scaled element by element.
 */
function scaleInPlace(values: Float32Array, at: number, count: number, scale: number): void {
  for (let i = at, end = at + count; i < end; i++) values[i]! *= scale;
}

/**
 * Example records (the layout of `#libs/dataset`) checked against a {@link RecordLayout}: each
 * record's dtypes and element count match it (its dims may differ, e.g. `[784]` records for a
 * `[28, 28, 1]` layout), and where its features and label lie is known. Checking comes apart
 * from copying, so that a chunk can be checked whole as it is read, before any of its examples
 * is used, and its examples then copied one at a time straight to where they go (a trainer's
 * shuffle buffer), with no batch of the whole chunk in between.
 */
export class CheckedRecords {
  /** Examples in the records. */
  readonly size: number;
  /** Feature elements per example. */
  readonly perExample: number;

  private constructor(
    private readonly records: readonly Uint8Array[],
    private readonly layout: RecordLayout,
    private readonly featuresAt: Int32Array,
    private readonly labelAt: Int32Array,
  ) {
    this.size = records.length;
    this.perExample = layout.featureShape.reduce((a, b) => a * b, 1);
  }

  /**
   * Checks every record against `layout`.
   * @throws RecordLayoutError naming the record and the field that does not match.
   * @throws MalformedRecordError (from `#libs/dataset`) when a record's own header is broken.
   */
  static check(records: readonly Uint8Array[], layout: RecordLayout): CheckedRecords {
    const perExample = layout.featureShape.reduce((a, b) => a * b, 1);
    const featuresAt = new Int32Array(records.length);
    const labelAt = new Int32Array(records.length);
    for (let r = 0; r < records.length; r++) {
      const where = `record ${r} of the batch`;
      const header = parseExampleHeader(records[r]!, where);
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
      featuresAt[r] = header.featuresOffset;
      labelAt[r] = header.labelOffset;
    }
    return new CheckedRecords(records, layout, featuresAt, labelAt);
  }

  /**
   * Copies example `r` into example slot `at` of `features` (multiplied by the layout's scale)
   * and `labels`, which must have the layout's label dtype.
   */
  copyInto(r: number, features: Float32Array, labels: Float32Array | Int32Array, at: number): void {
    const record = this.records[r]!;
    const pe = this.perExample;
    const base = at * pe;
    const start = this.featuresAt[r]!;
    const { scale } = this.layout;
    if (this.layout.featureDtype === 'uint8') {
      features.set(record.subarray(start, start + pe), base);
      if (scale !== 1) scaleInPlace(features, base, pe, scale);
    } else if (LITTLE_ENDIAN_HOST) {
      new Uint8Array(features.buffer, features.byteOffset + 4 * base, 4 * pe).set(
        record.subarray(start, start + 4 * pe),
      );
      if (scale !== 1) scaleInPlace(features, base, pe, scale);
    } else {
      const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
      for (let i = 0; i < pe; i++) features[base + i] = view.getFloat32(start + 4 * i, true) * scale;
    }
    const label = this.labelAt[r]!;
    if (labels instanceof Int32Array) {
      labels[at] = record[label]! | (record[label + 1]! << 8) | (record[label + 2]! << 16) | (record[label + 3]! << 24);
    } else if (LITTLE_ENDIAN_HOST) {
      labelBytes.set(record.subarray(label, label + 4));
      labels[at] = labelFloat[0]!;
    } else {
      labels[at] = new DataView(record.buffer, record.byteOffset, record.byteLength).getFloat32(label, true);
    }
  }

  /** Every example, in order, in one new {@link Batch}. */
  toBatch(): Batch {
    const features = new Float32Array(this.size * this.perExample);
    const labels = this.layout.labelDtype === 'int32' ? new Int32Array(this.size) : new Float32Array(this.size);
    for (let r = 0; r < this.size; r++) this.copyInto(r, features, labels, r);
    return { features, labels, size: this.size };
  }
}

/**
 * Decodes example records (the layout of `#libs/dataset`) into one {@link Batch}: features in a
 * single Float32Array, multiplied by `layout.scale`, and labels as Int32Array or Float32Array per
 * `layout.labelDtype`. Each record must match the layout (see {@link CheckedRecords}).
 *
 * @throws RecordLayoutError naming the record and the field that does not match.
 */
export function decodeBatch(records: readonly Uint8Array[], layout: RecordLayout): Batch {
  return CheckedRecords.check(records, layout).toBatch();
}
