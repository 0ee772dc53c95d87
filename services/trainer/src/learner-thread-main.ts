/**
 * The learner thread (see `LearnerThread`): selects the TF.js backend, says which it took, then
 * runs the calls it is sent one at a time, in order, on one `TfjsLearner`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { TfjsLearner, selectBackend, type Batch, type PlainTensor } from '#libs/learner';
import { learnerOptions } from './learner-options.js';
import type { LearnerReply, LearnerRequest, LearnerThreadReady, ThreadError } from './learner-thread.js';
import { SharedArea, readShared, type SharedTensors } from './shared-tensors.js';

function threadError(err: unknown): ThreadError {
  if (err instanceof Error) return { name: err.name, message: err.message, stack: err.stack };
  return { name: 'Error', message: String(err) };
}

/** The memory of each tensor that is its own, to hand over rather than copy. */
function ownBuffers(tensors: readonly PlainTensor[]): ArrayBuffer[] {
  const out = new Set<ArrayBuffer>();
  for (const { data } of tensors) {
    const buffer = data.buffer;
    if (buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === buffer.byteLength)
      out.add(buffer);
  }
  return [...out];
}

const port = parentPort;
if (port === null) throw new Error('learner-thread-main runs as a worker thread');

let learner: TfjsLearner | undefined;
/** Where each update is written for the trainer, which copies it out as it arrives. */
const updates = new SharedArea();
/**
 * Whether the backend copies what tensors are made from (wasm copies into its heap), so views of
 * the shared memory can be used as they are; otherwise they are copied first.
 */
let viewsAreCopied = false;

function batchOf(shared: SharedTensors, size: number): Batch {
  const [features, labels] = readShared(shared, { copy: !viewsAreCopied });
  return { features: features!.data as Float32Array, labels: labels!.data as Float32Array | Int32Array, size };
}

function current(): TfjsLearner {
  if (learner === undefined) throw new Error('no learner on the learner thread: create one first');
  return learner;
}

async function run(request: LearnerRequest): Promise<{ value?: unknown; transfer?: ArrayBuffer[] }> {
  switch (request.op) {
    case 'create':
      learner?.shutdown();
      learner = new TfjsLearner(learnerOptions(request.job));
      return {};
    case 'initialize':
      await current().initialize(request.spec);
      return {};
    case 'getParams': {
      const tensors = await current().getParams();
      return { value: tensors, transfer: ownBuffers(tensors) };
    }
    case 'getUpdate':
      return { value: updates.write(await current().getUpdate()) };
    case 'setParams':
      current().setParams(readShared(request.params, { copy: !viewsAreCopied }));
      return {};
    case 'train':
      return { value: await current().train(batchOf(request.batch, request.size)) };
    case 'trainForUpdate': {
      const result = await current().train(batchOf(request.batch, request.size));
      return { value: { result, update: updates.write(await current().getUpdate()) } };
    }
    case 'evaluate':
      return { value: await current().evaluate(batchOf(request.batch, request.size)) };
    case 'shutdown':
      learner?.shutdown();
      learner = undefined;
      return {};
  }
}

let ready: LearnerThreadReady;
try {
  const backend = await selectBackend((workerData as { backend: string }).backend);
  viewsAreCopied = backend.name === 'wasm';
  ready = { backend };
} catch (err) {
  ready = { error: threadError(err) };
}
port.postMessage(ready);

/** The error of a detached call that failed, for the next call to fail with. */
let detachedFailure: unknown;
let queue = Promise.resolve();
port.on('message', (request: LearnerRequest) => {
  queue = queue.then(async () => {
    let reply: LearnerReply;
    let transfer: ArrayBuffer[] = [];
    try {
      if (detachedFailure !== undefined && !request.detached) {
        const failure = detachedFailure;
        detachedFailure = undefined;
        throw failure;
      }
      const result = await run(request);
      reply = { id: request.id, value: result.value };
      transfer = result.transfer ?? [];
    } catch (err) {
      if (request.detached) detachedFailure ??= err;
      reply = { id: request.id, error: threadError(err) };
    }
    port.postMessage(reply, transfer);
  });
});
