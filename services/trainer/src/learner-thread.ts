import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { JobSpec } from '#libs/job-spec';
import type {
  BackendInfo,
  Batch,
  EvaluationResult,
  Learner,
  LearnerSpec,
  PlainTensor,
  TrainResult,
} from '#libs/learner';
import { SharedArea, readShared, type SharedTensors } from './shared-tensors.js';

/** What the learner thread needs of a job to build its learner (see `learnerOptions`). */
export type LearnerJob = Pick<JobSpec, 'training' | 'optimizer'>;

/**
 * A call on the learner thread; the thread runs them one at a time, in the order sent. A
 * `detached` call is not waited for: when it fails, the call after it fails with its error.
 */
export type LearnerRequest = { id: number; detached?: boolean } & (
  | { op: 'create'; job: LearnerJob }
  | { op: 'initialize'; spec: LearnerSpec }
  | { op: 'getParams' | 'getUpdate' | 'shutdown' }
  /** The parameters in shared memory. */
  | { op: 'setParams'; params: SharedTensors }
  /** The minibatch in shared memory: `features`, then `labels`. */
  | { op: 'train' | 'trainForUpdate' | 'evaluate'; batch: SharedTensors; size: number }
);

/** A request before it is numbered. */
type Call = LearnerRequest extends infer R ? (R extends unknown ? Omit<R, 'id'> : never) : never;

/** An error as it crosses the thread boundary. */
export interface ThreadError {
  name: string;
  message: string;
  stack?: string;
}

/** The thread's answer to a request. */
export type LearnerReply = { id: number; value?: unknown } | { id: number; error: ThreadError };

/** The thread's first message: the backend it computes on, or why it has none. */
export type LearnerThreadReady = { backend: BackendInfo } | { error: ThreadError };

/** Whether the learner thread is used (`TRAINER_LEARNER_THREAD`). */
export type LearnerThreadChoice = 'auto' | 'on' | 'off';

/** The native TF.js packages, whose addon may not load in a worker thread. */
const NATIVE_PACKAGES = ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node'];

/**
 * Whether a job's learner trains on the trainer's learner thread. `auto`: for jobs whose pushes
 * overlap training (`async` with `overlapPushes`), the only ones with network work to do while a
 * minibatch trains, unless a native TF.js package is installed (its addon is not known to load
 * in worker threads, and it computes off the event loop already). Elsewhere the hand-over to the
 * thread costs more than it frees: measured on a 2-core machine, a step of the example MLP took
 * about 1 ms longer through the thread.
 */
export function usesLearnerThread(choice: LearnerThreadChoice, job: LearnerJob): boolean {
  if (choice !== 'auto') return choice === 'on';
  if (job.training.mode !== 'async' || job.training.overlapPushes !== true) return false;
  return !nativeTfjsInstalled();
}

function nativeTfjsInstalled(): boolean {
  const require = createRequire(import.meta.url);
  return NATIVE_PACKAGES.some((name) => {
    try {
      require.resolve(name);
      return true;
    } catch {
      return false;
    }
  });
}

/** `error` as it came from the thread, with its name, message and the thread's stack. */
export function fromThreadError(error: ThreadError): Error {
  const err = new Error(error.message);
  err.name = error.name;
  if (error.stack !== undefined) err.stack = error.stack;
  return err;
}

/** A minibatch as the two tensors it crosses as. */
function batchTensors(batch: Batch): PlainTensor[] {
  return [
    { name: 'features', dtype: 'float32', shape: [batch.features.length], data: batch.features },
    {
      name: 'labels',
      dtype: batch.labels[Symbol.toStringTag] === 'Int32Array' ? 'int32' : 'float32',
      shape: [batch.size],
      data: batch.labels,
    },
  ];
}

/** A shared area and the call whose answer frees it (undefined: free). */
interface AreaInUse {
  area: SharedArea;
  busyUntil: number | undefined;
}

/**
 * The trainer's learner on a worker thread of its own (`learner-thread-main.ts`), so that the
 * event loop stays free while a minibatch trains: the parameter servers' replies are read, the
 * next minibatch decoded and an overlapped push written out meanwhile. TF.js computes on the
 * wasm backend synchronously, which would otherwise hold the event loop for the whole step.
 * One thread per trainer process, one learner at a time on it. Parameters, minibatches and
 * updates cross through shared memory (one copy; messages carry only where they lie), which
 * costs far less than handing over or cloning their arrays with each message.
 *
 * When the thread dies, every call fails with why and `onExit` is told, so the process can end
 * and be restarted rather than train without a learner.
 */
export class LearnerThread {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  /** Where parameters and minibatches are written for the thread; one is free once it answered. */
  private readonly areas: AreaInUse[] = [];
  private ended: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    /** The backend the thread computes on. */
    readonly backend: BackendInfo,
  ) {
    worker.on('message', (reply: LearnerReply) => this.onReply(reply));
    worker.on('error', (err) => this.end(err));
    worker.on('exit', (code) => this.end(new Error(`the learner thread exited with code ${code}`)));
  }

  /** Called once when the thread ends by itself (not by `close`). */
  onExit: ((err: Error) => void) | undefined;

  /**
   * Starts the thread, which selects its TF.js backend (`backend`: a choice as for
   * `selectBackend`, or '' for the fastest present). `entry` is the thread's compiled script.
   * @throws the backend selection's error when the thread has no backend.
   */
  static async start(
    backend: string,
    entry = new URL('./learner-thread-main.js', import.meta.url),
  ): Promise<LearnerThread> {
    const worker = new Worker(entry, { workerData: { backend } });
    let onMessage!: (ready: LearnerThreadReady) => void;
    let onError!: (err: Error) => void;
    let onExit!: (code: number) => void;
    const ready = await new Promise<LearnerThreadReady>((resolve, reject) => {
      onMessage = resolve;
      onError = reject;
      onExit = (code) => reject(new Error(`the learner thread exited with code ${code} before it was ready`));
      worker.once('message', onMessage).once('error', onError).once('exit', onExit);
    }).finally(() => {
      // Only these: the worker's own listeners must stay (removing them stops its messages).
      worker.off('message', onMessage).off('error', onError).off('exit', onExit);
    });
    if ('error' in ready) {
      await worker.terminate();
      throw fromThreadError(ready.error);
    }
    return new LearnerThread(worker, ready.backend);
  }

  /**
   * A learner for one job on the thread `thread` (replacing the one before there), which may
   * still be starting: its `initialize` waits for it.
   */
  static learner(thread: Promise<LearnerThread>, job: LearnerJob): Learner {
    return new ThreadedLearner(thread, job);
  }

  /**
   * Sends a call and waits for its answer, which `read` turns into the result as it arrives
   * (before the thread can be sent anything else). `tensors` are written into a free shared
   * area, handed to `request` as it is made, and kept until the thread answered.
   */
  call<T>(
    request: Call | ((shared: SharedTensors) => Call),
    { tensors, read }: { tensors?: readonly PlainTensor[]; read?: (value: unknown) => T } = {},
  ): Promise<T> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<T>((resolve, reject) => {
      const id = this.post(request, tensors, false);
      this.pending.set(id, { resolve: (value) => resolve(read ? read(value) : (value as T)), reject });
    });
  }

  /** Sends a call without waiting; if it fails, the next `call` fails with its error. */
  send(request: Call | ((shared: SharedTensors) => Call), tensors?: readonly PlainTensor[]): void {
    if (!this.ended) this.post(request, tensors, true);
  }

  private post(
    request: Call | ((shared: SharedTensors) => Call),
    tensors: readonly PlainTensor[] | undefined,
    detached: boolean,
  ): number {
    const id = this.nextId++;
    if (typeof request === 'function') {
      let free = this.areas.find((a) => a.busyUntil === undefined);
      if (free === undefined) {
        free = { area: new SharedArea(), busyUntil: undefined };
        this.areas.push(free);
      }
      free.busyUntil = id;
      this.worker.postMessage({ ...request(free.area.write(tensors ?? [])), id, detached });
    } else {
      this.worker.postMessage({ ...request, id, detached });
    }
    return id;
  }

  /** Ends the thread. */
  async close(): Promise<void> {
    this.onExit = undefined;
    this.end(new Error('the learner thread was closed'));
    await this.worker.terminate();
  }

  private onReply(reply: LearnerReply): void {
    for (const a of this.areas) if (a.busyUntil === reply.id) a.busyUntil = undefined;
    const waiting = this.pending.get(reply.id);
    this.pending.delete(reply.id);
    if (waiting === undefined) return;
    if ('error' in reply) waiting.reject(fromThreadError(reply.error));
    else waiting.resolve(reply.value);
  }

  private end(err: Error): void {
    if (this.ended) return;
    this.ended = err;
    for (const { reject } of this.pending.values()) reject(err);
    this.pending.clear();
    this.onExit?.(err);
  }
}

/** A `Learner` whose calls run on a `LearnerThread`. */
class ThreadedLearner implements Learner {
  private thread: LearnerThread | undefined;

  constructor(
    private readonly starting: Promise<LearnerThread>,
    private readonly job: LearnerJob,
  ) {}

  async initialize(spec: LearnerSpec): Promise<void> {
    const thread = await this.starting;
    this.thread = thread;
    thread.send({ op: 'create', job: { training: this.job.training, optimizer: this.job.optimizer } });
    await thread.call({ op: 'initialize', spec });
  }

  getParams(): Promise<PlainTensor[]> {
    return this.on().call({ op: 'getParams' });
  }

  setParams(params: PlainTensor[]): void {
    this.on().send((shared) => ({ op: 'setParams', params: shared }), params);
  }

  train(batch: Batch): Promise<TrainResult> {
    return this.on().call((shared) => ({ op: 'train', batch: shared, size: batch.size }), {
      tensors: batchTensors(batch),
    });
  }

  trainForUpdate(batch: Batch): Promise<{ result: TrainResult; update: PlainTensor[] }> {
    return this.on().call((shared) => ({ op: 'trainForUpdate', batch: shared, size: batch.size }), {
      tensors: batchTensors(batch),
      read: (value) => {
        const { result, update } = value as { result: TrainResult; update: SharedTensors };
        return { result, update: readShared(update, { copy: true }) };
      },
    });
  }

  getUpdate(): Promise<PlainTensor[]> {
    // The thread writes every update into the same memory: copied out as it arrives.
    return this.on().call({ op: 'getUpdate' }, { read: (value) => readShared(value as SharedTensors, { copy: true }) });
  }

  evaluate(batch: Batch): Promise<EvaluationResult> {
    return this.on().call((shared) => ({ op: 'evaluate', batch: shared, size: batch.size }), {
      tensors: batchTensors(batch),
    });
  }

  shutdown(): void {
    this.thread?.send({ op: 'shutdown' });
  }

  private on(): LearnerThread {
    if (this.thread === undefined) throw new Error('the learner is not initialised; call initialize(spec) first');
    return this.thread;
  }
}
