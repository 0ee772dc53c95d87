import { expandPatterns, indexFiles, scanRecords } from '#libs/recordio';
import { DatasetMismatchError, MalformedRecordError } from './errors.js';
import { type DecodedExample, decodeExample, type FeatureDtype, type LabelDtype } from './example-record.js';

/** A decoded example and where its record came from. */
export interface LocatedExample extends DecodedExample {
  readonly file: string;
  /** Index of the record in its file, counting from 0. */
  readonly recordIndex: number;
}

/**
 * Decodes every record of the files matching `patterns` (files in the order
 * `expandPatterns` gives, records in file order), one at a time.
 * @throws MalformedRecordError naming the file and record index of a record that is not an example.
 */
export async function* readExamples(patterns: readonly string[]): AsyncGenerator<LocatedExample> {
  yield* examplesOfFiles(await expandPatterns(patterns));
}

async function* examplesOfFiles(files: readonly string[]): AsyncGenerator<LocatedExample> {
  for (const file of files) {
    let recordIndex = 0;
    for await (const record of scanRecords(file)) {
      let example: DecodedExample;
      try {
        example = decodeExample(record);
      } catch (err) {
        if (err instanceof MalformedRecordError) {
          throw new MalformedRecordError(`${file}: record ${recordIndex}: ${err.message}`, { cause: err });
        }
        throw err;
      }
      yield { ...example, file, recordIndex };
      recordIndex++;
    }
  }
}

/** All examples of a dataset packed into two arrays, like an IDX pair. */
export interface ExampleArrays {
  readonly count: number;
  /** Shape of one example's features. */
  readonly itemShape: readonly number[];
  readonly featureDtype: FeatureDtype;
  /** Every example's features, one after the other. */
  readonly features: Uint8Array | Float32Array;
  readonly labelDtype: LabelDtype;
  readonly labels: Int32Array | Float32Array;
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/**
 * Reads a converted dataset back into flat arrays: the reverse of {@link convertIdx}. Record
 * counts come from the chunk index first, so each array is allocated once.
 * @throws DatasetMismatchError when the examples do not all share one shape and dtypes.
 */
export async function readIdxExamples(patterns: readonly string[]): Promise<ExampleArrays> {
  const index = await indexFiles(patterns);
  const count = index.totalRecords;
  let arrays:
    | {
        itemShape: readonly number[];
        featureDtype: FeatureDtype;
        features: Uint8Array | Float32Array;
        labelDtype: LabelDtype;
        labels: Int32Array | Float32Array;
        itemSize: number;
      }
    | undefined;
  let i = 0;
  for await (const example of examplesOfFiles(index.files)) {
    if (arrays === undefined) {
      const itemSize = example.features.length;
      arrays = {
        itemShape: example.shape,
        featureDtype: example.featureDtype,
        features:
          example.featureDtype === 'uint8' ? new Uint8Array(count * itemSize) : new Float32Array(count * itemSize),
        labelDtype: example.labelDtype,
        labels: example.labelDtype === 'int32' ? new Int32Array(count) : new Float32Array(count),
        itemSize,
      };
    } else if (
      !sameShape(arrays.itemShape, example.shape) ||
      arrays.featureDtype !== example.featureDtype ||
      arrays.labelDtype !== example.labelDtype
    ) {
      throw new DatasetMismatchError(
        `${example.file}: record ${example.recordIndex} is [${example.shape.join(', ')}] ${example.featureDtype} with a ${example.labelDtype} label, ` +
          `the first record is [${arrays.itemShape.join(', ')}] ${arrays.featureDtype} with a ${arrays.labelDtype} label`,
      );
    }
    if (i >= count)
      throw new DatasetMismatchError(`the files hold more records than their chunk headers announce (${count})`);
    arrays.features.set(example.features, i * arrays.itemSize);
    arrays.labels[i] = example.label;
    i++;
  }
  if (i !== count) throw new DatasetMismatchError(`read ${i} records but the chunk headers announce ${count}`);
  if (arrays === undefined) {
    return {
      count: 0,
      itemShape: [],
      featureDtype: 'uint8',
      features: new Uint8Array(0),
      labelDtype: 'int32',
      labels: new Int32Array(0),
    };
  }
  const { itemSize: _itemSize, ...rest } = arrays;
  return { count, ...rest };
}
