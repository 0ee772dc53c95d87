import { createRequire } from 'node:module';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
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

/** What the thread starts with: the backend to select, where requests come, and the signals. */
export interface LearnerThreadData {
  /** A choice as for `selectBackend`, or '' for the fastest present. */
  backend: string;
  /** The port requests are posted to, which the thread reads between two calls. */
  requests: MessagePort;
  /** `Int32Array` cells shared with the thread: `DOORBELL`, `DONE` and `WANTED`. */
  signals: SharedArrayBuffer;
}

/** The cell the trainer adds one to after each request it posts, to wake the thread. */
export const DOORBELL = 0;
/** The cell where the thread writes the id of the last request it is done with. */
export const DONE = 1;
/**
 * The cell where the trainer writes the id it waits for the thread to be done with (0: none):
 * the thread wakes it only then, so that a queue of minibatches wakes it once per several
 * (a wake-up per minibatch cost the example's trainer on a 2-core machine about 7 %: 50,020 and
 * 51,030 samples/s against 53,836).
 */
export const WANTED = 2;
/** Cells in the signals' memory. */
const SIGNAL_CELLS = 3;

/**
 * Minibatches queued on the thread (`trainQueued`) at most: a few cover the trainer's own work
 * between two minibatches (reading the next, bookkeeping) and its jitter; more would only hold
 * memory and delay a preemption's hand-back by their training.
 */
export const TRAIN_QUEUE_DEPTH = 8;
/** Once the queue is full, the next minibatch waits until only this many are left in it. */
export const TRAIN_QUEUE_REFILL_AT = 2;

/** How long a wait for the thread to be done with a request sleeps before it looks again. */
const DONE_WAIT_MS = 100;

/** The thread's first message: the backend it computes on, or why it has none. */
export type LearnerThreadReady = { backend: BackendInfo } | { error: ThreadError };

/** Whether the learner thread is used (`TRAINER_LEARNER_THREAD`). */
export type LearnerThreadChoice = 'auto' | 'on' | 'off';

/** The native TF.js packages, whose addon may not load in a worker thread. */
const NATIVE_PACKAGES = ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node'];

/**
 * Whether a job's learner trains on the trainer's learner thread. `auto`: for jobs whose exchange
 * with the parameter servers overlaps training, `local` with `overlapRounds` (its steps are
 * queued on the thread and train back to back while this thread reads the next minibatches and
 * lands the last round) and `async` with `overlapPushes`, unless a native TF.js package is
 * installed (its addon is not known to load in worker threads, and it computes off the event
 * loop already). Elsewhere the thread waits out every exchange, which then costs more than the
 * thread frees. Measured on a 2-core machine, the example MLP, one trainer and one pserver,
 * samples/s with the thread against without: `local` with `overlapRounds` 61,272 against
 * 55,846 (32 steps) and 48,329 against 40,372 (4 steps); `async` with `overlapPushes` 28,202
 * against 24,534; plain `local` 53,836 against 56,782 (32 steps) and 37,367 against 40,440
 * (4 steps).
 */
export function usesLearnerThread(choice: LearnerThreadChoice, job: LearnerJob): boolean {
  if (choice !== 'auto') return choice === 'on';
  const { mode, overlapPushes, overlapRounds } = job.training;
  const overlapped = (mode === 'async' && overlapPushes === true) || (mode === 'local' && overlapRounds === true);
  return overlapped && !nativeTfjsInstalled();
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
  /** `DOORBELL`, `DONE` and `WANTED` (see `LearnerThreadData`). */
  private readonly signals: Int32Array;

  private constructor(
    private readonly worker: Worker,
    /** Where requests are posted; the thread reads them itself. */
    private readonly requests: MessagePort,
    signals: SharedArrayBuffer,
    /** The backend the thread computes on. */
    readonly backend: BackendInfo,
  ) {
    this.signals = new Int32Array(signals);
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
    const { port1, port2 } = new MessageChannel();
    const signals = new SharedArrayBuffer(SIGNAL_CELLS * Int32Array.BYTES_PER_ELEMENT);
    const data: LearnerThreadData = { backend, requests: port2, signals };
    const worker = new Worker(entry, { workerData: data, transferList: [port2] });
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
      port1.close();
      throw fromThreadError(ready.error);
    }
    return new LearnerThread(worker, port1, signals, ready.backend);
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
  send(request: Call | ((shared: SharedTensors) => Call), tensors?: readonly PlainTensor[]): number {
    return this.ended ? 0 : this.post(request, tensors, true);
  }

  /**
   * Waits until the thread is done with request `id` (and so with every one before it).
   * @throws why the thread ended, when it did first.
   */
  async doneWith(id: number): Promise<void> {
    const { signals } = this;
    try {
      for (;;) {
        if (this.ended) throw this.ended;
        // Said before DONE is read again: either the thread sees it and wakes this one, or
        // this one sees the thread done.
        Atomics.store(signals, WANTED, id);
        const done = Atomics.load(signals, DONE);
        if (done >= id) return;
        const wait = Atomics.waitAsync(signals, DONE, done, DONE_WAIT_MS);
        if (wait.async) await wait.value;
      }
    } finally {
      Atomics.store(signals, WANTED, 0);
    }
  }

  /** The id of the last request the thread is done with. */
  done(): number {
    return Atomics.load(this.signals, DONE);
  }

  private post(
    request: Call | ((shared: SharedTensors) => Call),
    tensors: readonly PlainTensor[] | undefined,
    detached: boolean,
  ): number {
    const id = this.nextId++;
    if (typeof request === 'function') {
      const done = this.done();
      let free = this.areas.find((a) => a.busyUntil === undefined || a.busyUntil <= done);
      if (free === undefined) {
        free = { area: new SharedArea(), busyUntil: undefined };
        this.areas.push(free);
      }
      free.busyUntil = id;
      this.requests.postMessage({ ...request(free.area.write(tensors ?? [])), id, detached });
    } else {
      this.requests.postMessage({ ...request, id, detached });
    }
    Atomics.add(this.signals, DOORBELL, 1);
    Atomics.notify(this.signals, DOORBELL);
    return id;
  }

  /** Ends the thread. */
  async close(): Promise<void> {
    this.onExit = undefined;
    this.end(new Error('the learner thread was closed'));
    await this.worker.terminate();
    this.requests.close();
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
  /** Ids of the minibatches queued by `trainQueued` that may not have trained yet, oldest first. */
  private readonly queued: number[] = [];

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

  /**
   * Queues the minibatch on the thread, after the calls before it, and resolves once it is
   * queued: at once while fewer than `TRAIN_QUEUE_DEPTH` wait there, else once all but
   * `TRAIN_QUEUE_REFILL_AT` of them trained. Its result is not kept; if it fails, the next call waited for fails with why.
   */
  async trainQueued(batch: Batch): Promise<void> {
    const thread = this.on();
    const { queued } = this;
    const done = thread.done();
    while (queued.length > 0 && queued[0]! <= done) queued.shift();
    if (queued.length >= TRAIN_QUEUE_DEPTH) {
      await thread.doneWith(queued[queued.length - TRAIN_QUEUE_REFILL_AT - 1]!);
      queued.splice(0, queued.length - TRAIN_QUEUE_REFILL_AT);
    }
    queued.push(thread.send((shared) => ({ op: 'train', batch: shared, size: batch.size }), batchTensors(batch)));
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
