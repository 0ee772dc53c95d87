import { RecordLayoutError } from './errors.js';
import type { FeatureDtype, LabelDtype } from './model-spec.js';

/**
 * One example as stored in a RecordIO record (all integers little-endian):
 *
 * | offset | field |
 * | --- | --- |
 * | 0 | u8 format version, {@link RECORD_FORMAT_VERSION} |
 * | 1 | u8 feature dtype: 1 uint8, 2 float32 |
 * | 2 | u8 label dtype: 1 int32, 2 float32 |
 * | 3 | u8 rank r |
 * | 4 | r x u32 dims |
 * | 4 + 4r | prod(dims) feature elements, uint8 or float32 |
 * | then | the label, 4 bytes, int32 or float32 |
 */
export const RECORD_FORMAT_VERSION = 1;

/** Feature dtype codes of the record header. */
export const FEATURE_DTYPE_CODES: Readonly<Record<FeatureDtype, number>> = { uint8: 1, float32: 2 };

/** Label dtype codes of the record header. */
export const LABEL_DTYPE_CODES: Readonly<Record<LabelDtype, number>> = { int32: 1, float32: 2 };

/** Bytes before the dims: version, feature dtype, label dtype, rank. */
export const RECORD_PREFIX_BYTES = 4;

/** Bytes of the label at the end of a record. */
export const RECORD_LABEL_BYTES = 4;

/** A parsed record header, with where the features and the label lie. */
export interface RecordHeader {
  featureDtype: FeatureDtype;
  labelDtype: LabelDtype;
  dims: number[];
  /** prod(dims). */
  featureCount: number;
  featuresOffset: number;
  labelOffset: number;
}

/** Reads a little-endian uint32 without allocating. */
export function readU32(bytes: Uint8Array, offset: number): number {
  return (bytes[offset]! | (bytes[offset + 1]! << 8) | (bytes[offset + 2]! << 16) | (bytes[offset + 3]! << 24)) >>> 0;
}

function dtypeName<T extends string>(codes: Readonly<Record<T, number>>, code: number): T | undefined {
  return (Object.keys(codes) as T[]).find((k) => codes[k] === code);
}

/**
 * Parses and checks a record's header and total size. `where` names the record in errors
 * (e.g. `record 3 of the batch`).
 *
 * @throws RecordLayoutError for an unknown version or dtype, or a size that disagrees with the header.
 */
export function parseRecordHeader(record: Uint8Array, where = 'record'): RecordHeader {
  if (record.length < RECORD_PREFIX_BYTES) {
    throw new RecordLayoutError(
      `${where} is ${record.length} bytes, shorter than the ${RECORD_PREFIX_BYTES}-byte header`,
    );
  }
  const version = record[0]!;
  if (version !== RECORD_FORMAT_VERSION) {
    throw new RecordLayoutError(`${where} has format version ${version}, expected ${RECORD_FORMAT_VERSION}`);
  }
  const featureDtype = dtypeName(FEATURE_DTYPE_CODES, record[1]!);
  if (featureDtype === undefined) throw new RecordLayoutError(`${where} has unknown feature dtype code ${record[1]}`);
  const labelDtype = dtypeName(LABEL_DTYPE_CODES, record[2]!);
  if (labelDtype === undefined) throw new RecordLayoutError(`${where} has unknown label dtype code ${record[2]}`);
  const rank = record[3]!;
  const featuresOffset = RECORD_PREFIX_BYTES + 4 * rank;
  if (record.length < featuresOffset) {
    throw new RecordLayoutError(`${where} is ${record.length} bytes, too short for the dims of rank ${rank}`);
  }
  const dims: number[] = [];
  let featureCount = 1;
  for (let i = 0; i < rank; i++) {
    const d = readU32(record, RECORD_PREFIX_BYTES + 4 * i);
    dims.push(d);
    featureCount *= d;
  }
  const labelOffset = featuresOffset + featureCount * (featureDtype === 'uint8' ? 1 : 4);
  const expectedLength = labelOffset + RECORD_LABEL_BYTES;
  if (record.length !== expectedLength) {
    throw new RecordLayoutError(
      `${where} is ${record.length} bytes, but its header (dims [${dims.join(', ')}], ${featureDtype}) needs ${expectedLength}`,
    );
  }
  return { featureDtype, labelDtype, dims, featureCount, featuresOffset, labelOffset };
}

/** What {@link encodeRecord} needs to know about the example. */
export interface RecordEncoding {
  featureShape: readonly number[];
  featureDtype: FeatureDtype;
  labelDtype: LabelDtype;
}

/**
 * Encodes one example in the record format. Features are stored as given (uint8 values are
 * truncated to bytes); the decoder applies the layout's scale.
 */
export function encodeRecord(features: ArrayLike<number>, label: number, encoding: RecordEncoding): Uint8Array {
  const count = encoding.featureShape.reduce((a, b) => a * b, 1);
  if (features.length !== count) {
    throw new RecordLayoutError(
      `encodeRecord got ${features.length} features for shape [${encoding.featureShape.join(', ')}] (${count})`,
    );
  }
  const rank = encoding.featureShape.length;
  const featuresOffset = RECORD_PREFIX_BYTES + 4 * rank;
  const elementBytes = encoding.featureDtype === 'uint8' ? 1 : 4;
  const labelOffset = featuresOffset + count * elementBytes;
  const bytes = new Uint8Array(labelOffset + RECORD_LABEL_BYTES);
  const view = new DataView(bytes.buffer);
  bytes[0] = RECORD_FORMAT_VERSION;
  bytes[1] = FEATURE_DTYPE_CODES[encoding.featureDtype];
  bytes[2] = LABEL_DTYPE_CODES[encoding.labelDtype];
  bytes[3] = rank;
  encoding.featureShape.forEach((d, i) => view.setUint32(RECORD_PREFIX_BYTES + 4 * i, d, true));
  if (encoding.featureDtype === 'uint8') {
    bytes.set(features, featuresOffset);
  } else {
    for (let i = 0; i < count; i++) view.setFloat32(featuresOffset + 4 * i, features[i]!, true);
  }
  if (encoding.labelDtype === 'int32') view.setInt32(labelOffset, label, true);
  else view.setFloat32(labelOffset, label, true);
  return bytes;
}
