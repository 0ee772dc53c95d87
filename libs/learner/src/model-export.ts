import * as tf from '@tensorflow/tfjs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomically } from '#libs/file-integrity';
import { ModelFilesError } from './errors.js';

/** File name of the topology and weights manifest in a saved model directory. */
export const MODEL_JSON_FILE = 'model.json';

/** File name of the weights in a saved model directory. */
export const WEIGHTS_FILE = 'weights.bin';

/**
 * Writes `model` to `dir` in the standard TF.js LayersModel format: `model.json` (topology and
 * a weights manifest naming `weights.bin`) and `weights.bin`. The directory is created if
 * needed; `model.json` is written last and renamed into place, so a reader never sees it
 * point at weights that are not there yet. The result loads with `tf.loadLayersModel`
 * (through {@link loadLayersModelFromDir} in Node, or over HTTP from a browser).
 */
export async function saveLayersModel(model: tf.LayersModel, dir: string): Promise<tf.io.SaveResult> {
  await mkdir(dir, { recursive: true });
  return model.save(
    tf.io.withSaveHandler(async (artifacts) => {
      const weights =
        artifacts.weightData === undefined ? new ArrayBuffer(0) : tf.io.CompositeArrayBuffer.join(artifacts.weightData);
      const modelJSON: tf.io.ModelJSON = {
        modelTopology: artifacts.modelTopology as object,
        format: artifacts.format,
        generatedBy: artifacts.generatedBy,
        convertedBy: artifacts.convertedBy,
        weightsManifest: [{ paths: [WEIGHTS_FILE], weights: artifacts.weightSpecs ?? [] }],
        ...(artifacts.trainingConfig !== undefined ? { trainingConfig: artifacts.trainingConfig } : {}),
        ...(artifacts.userDefinedMetadata !== undefined ? { userDefinedMetadata: artifacts.userDefinedMetadata } : {}),
      };
      await writeFile(join(dir, WEIGHTS_FILE), new Uint8Array(weights));
      await writeFileAtomically(join(dir, MODEL_JSON_FILE), JSON.stringify(modelJSON));
      return { modelArtifactsInfo: tf.io.getModelArtifactsInfoForJSON(artifacts) };
    }),
  );
}

async function readOrThrow(path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (cause) {
    throw new ModelFilesError(`cannot read ${path}: ${(cause as Error).message}`, { cause });
  }
}

/**
 * An `IOHandler` that loads a LayersModel from `dir/model.json` and the weight files its
 * manifest names (paths relative to `dir`), with plain `node:fs` — no tfjs-node needed.
 */
export function fileSystemModelHandler(dir: string): tf.io.IOHandler {
  return {
    load: async () => {
      const jsonPath = join(dir, MODEL_JSON_FILE);
      let modelJSON: tf.io.ModelJSON;
      try {
        modelJSON = JSON.parse((await readOrThrow(jsonPath)).toString('utf8')) as tf.io.ModelJSON;
      } catch (cause) {
        if (cause instanceof ModelFilesError) throw cause;
        throw new ModelFilesError(`${jsonPath} is not valid JSON: ${(cause as Error).message}`, { cause });
      }
      if (modelJSON.modelTopology === undefined) throw new ModelFilesError(`${jsonPath} has no modelTopology`);
      return tf.io.getModelArtifactsForJSON(modelJSON, async (manifest) => {
        const specs: tf.io.WeightsManifestEntry[] = [];
        const buffers: ArrayBuffer[] = [];
        for (const group of manifest) {
          specs.push(...group.weights);
          for (const path of group.paths) {
            const bytes = await readOrThrow(join(dir, path));
            buffers.push(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer);
          }
        }
        return [specs, tf.io.CompositeArrayBuffer.join(buffers)];
      });
    },
  };
}

/** Loads a LayersModel written by {@link saveLayersModel} (or any TF.js `model.json` on disk). */
export async function loadLayersModelFromDir(dir: string): Promise<tf.LayersModel> {
  return tf.loadLayersModel(fileSystemModelHandler(dir));
}
