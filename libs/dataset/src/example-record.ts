import { InvalidExampleError, MalformedRecordError } from './errors.js';

/** Version byte written at offset 0 of every example record. */
export const EXAMPLE_FORMAT_VERSION = 1;

/** Element type of an example's features. */
export type FeatureDtype = 'uint8' | 'float32';

/** Type of an example's label. */
export type LabelDtype = 'int32' | 'float32';

/** One training example: a feature tensor and its label. */
export interface Example {
  /** Feature elements in row-major order; `Uint8Array` is stored as uint8, `Float32Array` as float32. */
  readonly features: Uint8Array | Float32Array;
  /** Feature tensor dimensions; their product is `features.length`. */
  readonly shape: readonly number[];
  /** How the label is stored. */
  readonly labelDtype: LabelDtype;
  /** The label value (an integer when `labelDtype` is `int32`). */
  readonly label: number;
}

/** An example read back from a record, with the stored feature dtype made explicit. */
export interface DecodedExample extends Example {
  readonly featureDtype: FeatureDtype;
}

const FEATURE_DTYPE_CODES: Record<FeatureDtype, number> = { uint8: 1, float32: 2 };
const LABEL_DTYPE_CODES: Record<LabelDtype, number> = { int32: 1, float32: 2 };
const FEATURE_DTYPE_BY_CODE = new Map<number, FeatureDtype>([
  [1, 'uint8'],
  [2, 'float32'],
]);
const LABEL_DTYPE_BY_CODE = new Map<number, LabelDtype>([
  [1, 'int32'],
  [2, 'float32'],
]);
const FIXED_HEADER_BYTES = 4;
const DIM_BYTES = 4;
const LABEL_BYTES = 4;
const MAX_RANK = 255;
const MAX_DIM = 0xffff_ffff;
const INT32_MIN = -0x8000_0000;
const INT32_MAX = 0x7fff_ffff;
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function featureElementBytes(dtype: FeatureDtype): number {
  return dtype === 'uint8' ? 1 : 4;
}

/** Size in bytes of the record that encodes an example of this shape and feature dtype. */
export function exampleRecordSize(shape: readonly number[], featureDtype: FeatureDtype): number {
  const elements = shape.reduce((n, d) => n * d, 1);
  return FIXED_HEADER_BYTES + DIM_BYTES * shape.length + elements * featureElementBytes(featureDtype) + LABEL_BYTES;
}

/**
 * Encodes one example as a record: version, feature dtype, label dtype, rank, the dims as
 * uint32 LE, the feature elements (uint8, or float32 LE), then the label (4 bytes LE).
 */
export function encodeExample(example: Example): Uint8Array {
  const { features, shape, labelDtype, label } = example;
  const featureDtype: FeatureDtype = features instanceof Uint8Array ? 'uint8' : 'float32';
  if (shape.length > MAX_RANK) {
    throw new InvalidExampleError(`example rank ${shape.length} exceeds ${MAX_RANK}`);
  }
  let elements = 1;
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0 || d > MAX_DIM) {
      throw new InvalidExampleError(`example shape [${shape.join(', ')}] has an invalid dimension ${d}`);
    }
    elements *= d;
  }
  if (elements !== features.length) {
    throw new InvalidExampleError(
      `example shape [${shape.join(', ')}] holds ${elements} elements but ${features.length} features were given`,
    );
  }
  const labelCode = LABEL_DTYPE_CODES[labelDtype];
  if (labelCode === undefined) {
    throw new InvalidExampleError(`unknown label dtype ${String(labelDtype)}`);
  }
  if (labelDtype === 'int32' && (!Number.isInteger(label) || label < INT32_MIN || label > INT32_MAX)) {
    throw new InvalidExampleError(`label ${label} is not an int32`);
  }

  const out = new Uint8Array(exampleRecordSize(shape, featureDtype));
  const view = new DataView(out.buffer);
  out[0] = EXAMPLE_FORMAT_VERSION;
  out[1] = FEATURE_DTYPE_CODES[featureDtype];
  out[2] = labelCode;
  out[3] = shape.length;
  let offset = FIXED_HEADER_BYTES;
  for (const d of shape) {
    view.setUint32(offset, d, true);
    offset += DIM_BYTES;
  }
  if (features instanceof Uint8Array) {
    out.set(features, offset);
  } else if (LITTLE_ENDIAN_HOST) {
    // The feature offset is a multiple of 4 in a fresh buffer, so a float view lines up.
    new Float32Array(out.buffer, offset, features.length).set(features);
  } else {
    for (let i = 0; i < features.length; i++) view.setFloat32(offset + 4 * i, features[i]!, true);
  }
  offset += features.byteLength;
  if (labelDtype === 'int32') view.setInt32(offset, label, true);
  else view.setFloat32(offset, label, true);
  return out;
}

/** Where the parts of one record lie, from its header; nothing is copied. */
export interface ExampleHeader {
  readonly featureDtype: FeatureDtype;
  readonly labelDtype: LabelDtype;
  readonly shape: readonly number[];
  /** prod(shape). */
  readonly featureCount: number;
  readonly featuresOffset: number;
  readonly labelOffset: number;
}

/**
 * Parses and checks a record's header and total length, without copying anything. `where`
 * names the record in errors (e.g. `record 3 of the batch`).
 * @throws MalformedRecordError on a bad version, an unknown dtype or a length mismatch.
 */
export function parseExampleHeader(record: Uint8Array, where = 'example record'): ExampleHeader {
  if (record.length < FIXED_HEADER_BYTES) {
    throw new MalformedRecordError(
      `${where} too short: expected at least ${FIXED_HEADER_BYTES} header bytes got ${record.length}`,
    );
  }
  if (record[0] !== EXAMPLE_FORMAT_VERSION) {
    throw new MalformedRecordError(`${where}: bad format version ${record[0]} (expected ${EXAMPLE_FORMAT_VERSION})`);
  }
  const featureDtype = FEATURE_DTYPE_BY_CODE.get(record[1]!);
  if (featureDtype === undefined) {
    throw new MalformedRecordError(`${where}: unknown feature dtype code ${record[1]} (expected 1 uint8 or 2 float32)`);
  }
  const labelDtype = LABEL_DTYPE_BY_CODE.get(record[2]!);
  if (labelDtype === undefined) {
    throw new MalformedRecordError(`${where}: unknown label dtype code ${record[2]} (expected 1 int32 or 2 float32)`);
  }
  const rank = record[3]!;
  const featuresOffset = FIXED_HEADER_BYTES + DIM_BYTES * rank;
  if (record.length < featuresOffset) {
    throw new MalformedRecordError(
      `${where}: length mismatch: expected at least ${featuresOffset} bytes for ${rank} dims got ${record.length}`,
    );
  }
  const shape: number[] = [];
  let featureCount = 1;
  for (let i = 0; i < rank; i++) {
    const at = FIXED_HEADER_BYTES + DIM_BYTES * i;
    const d = (record[at]! | (record[at + 1]! << 8) | (record[at + 2]! << 16) | (record[at + 3]! << 24)) >>> 0;
    shape.push(d);
    featureCount *= d;
  }
  const labelOffset = featuresOffset + featureCount * featureElementBytes(featureDtype);
  const expected = labelOffset + LABEL_BYTES;
  if (record.length !== expected) {
    throw new MalformedRecordError(
      `${where}: length mismatch: expected ${expected} bytes got ${record.length} (shape [${shape.join(', ')}], ${featureDtype})`,
    );
  }
  return { featureDtype, labelDtype, shape, featureCount, featuresOffset, labelOffset };
}

/**
 * Decodes a record written by {@link encodeExample}. The returned features are a copy, so they
 * do not keep the record's buffer alive.
 * @throws MalformedRecordError on a bad version, an unknown dtype or a length mismatch.
 */
export function decodeExample(record: Uint8Array): DecodedExample {
  const { featureDtype, labelDtype, shape, featureCount, featuresOffset, labelOffset } = parseExampleHeader(record);
  const view = new DataView(record.buffer, record.byteOffset, record.byteLength);
  let features: Uint8Array | Float32Array;
  if (featureDtype === 'uint8') {
    features = record.slice(featuresOffset, labelOffset);
  } else if (LITTLE_ENDIAN_HOST) {
    const start = record.byteOffset + featuresOffset;
    features = new Float32Array(record.buffer.slice(start, start + 4 * featureCount));
  } else {
    features = new Float32Array(featureCount);
    for (let i = 0; i < featureCount; i++) features[i] = view.getFloat32(featuresOffset + 4 * i, true);
  }
  const label = labelDtype === 'int32' ? view.getInt32(labelOffset, true) : view.getFloat32(labelOffset, true);
  return { features, shape, featureDtype, labelDtype, label };
}

/** The parts of a record layout that say how an example is stored. */
export interface ExampleEncoding {
  readonly featureShape: readonly number[];
  readonly featureDtype: FeatureDtype;
  readonly labelDtype: LabelDtype;
}

/** Encodes plain feature values as a record of the given encoding (see {@link encodeExample}). */
export function encodeExampleValues(values: ArrayLike<number>, label: number, encoding: ExampleEncoding): Uint8Array {
  const features = encoding.featureDtype === 'uint8' ? Uint8Array.from(values) : Float32Array.from(values);
  return encodeExample({ features, shape: encoding.featureShape, labelDtype: encoding.labelDtype, label });
}
