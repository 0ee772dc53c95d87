import { jetstream, type Consumer, type JetStreamClient, type JsMsg, type PubAck } from '@nats-io/jetstream';
import {
  CONSUMERS,
  JOB_ID_PATTERN,
  KV_BUCKETS,
  MalformedMessageError,
  STREAMS,
  SUBJECTS,
  decodeJsonObject,
  encodeJson,
  openBucket,
  type JobEvent,
  type JobListReply,
  type JobFaultReport,
  type JobStatusReply,
  type NatsConnection,
  type StopReason,
  type TaskClaim,
  type TaskClaimReply,
  type TaskMessage,
  type TaskReport,
  type TaskReportReply,
} from '#libs/messaging';
import type { LineLogger } from '#libs/logging';
import { sleep } from '#libs/retry';
import {
  CLAIM_RETRY_BUDGET_MS,
  MASTER_REQUEST_TIMEOUT_MS,
  MIN_PULL_EXPIRES_MS,
  NEXT_TASK_TIMEOUT_MS,
  RETRY_INITIAL_BACKOFF_MS,
} from './defaults.js';
import { InvalidJobIdError, JobUnknownToMasterError, MasterUnavailableError } from './errors.js';
import { watchJobRecords, type JobWatch } from './job-watch.js';
import { requestUntilReply } from './request-retry.js';
import { parseTaskMessage } from './task-message.js';

/**
 * A task this trainer pulled and the master granted it, until `deadlineMs` (epoch ms, by the
 * master's clock): for `leaseMs` unless the claim is renewed before.
 */
export interface ClaimedTask extends TaskMessage {
  deadlineMs: number;
  leaseMs: number;
}

/** Options of a `MasterClient`. */
export interface MasterClientOptions {
  /** Where skipped messages and retries are logged; warnings go to the console by default. */
  logger?: LineLogger;
  /** How long each claim, report, status or stop request waits for a reply. */
  requestTimeoutMs?: number;
  /** How long an unanswered claim is retried before the task is given up. */
  claimRetryBudgetMs?: number;
  /** First delay between retries of an unanswered request. */
  initialBackoffMs?: number;
  /** Replicas of the jobs bucket when `watchJobs` has to create it (`TRIBUTARY_JS_REPLICAS`); default 1. */
  jsReplicas?: number;
}

/** Options of `nextTask`. */
export interface NextTaskOptions {
  /** How long to wait for a task message; `null` comes back after it. */
  timeoutMs?: number;
  /** Stops waiting (and claiming) early; `null` comes back. */
  signal?: AbortSignal;
}

/**
 * What `pullTask` came back with: a granted task, or why there is none. `no-task`: nothing came
 * within the wait; `full`: the job already has `trainers.max` trainers at work; `stopped`: the
 * job stopped; `unreachable`: the master did not answer the claim in time; `aborted`: the signal
 * fired (a task pulled just before is handed back to the master, not dropped).
 */
export type TaskPull =
  | { kind: 'claimed'; task: ClaimedTask }
  | { kind: 'none'; reason: 'no-task' | 'full' | 'stopped' | 'unreachable' | 'aborted' };

/** The master's answer to a renewed claim, or `unreachable` when it did not answer. */
export type ClaimRenewal = TaskClaimReply | { ok: false; reason: 'unreachable' };

/** How long a task pulled after the signal fired is offered back to the master. */
const ABORTED_HAND_BACK_BUDGET_MS = 2_000;

/** Options of a report. */
export interface ReportOptions {
  /** Gives up retrying (with `RequestAbortedError`) when it fires, e.g. when the job stops. */
  signal?: AbortSignal;
  /** Gives up after this many milliseconds; retries until a reply by default. */
  budgetMs?: number;
}

/** A live subscription to a job's events: iterate it, `stop()` to end it. */
export interface EventSubscription extends AsyncIterable<JobEvent> {
  stop(): void;
}

const CONSOLE_LOGGER: LineLogger = {
  log: () => undefined,
  warn: (m) => console.warn(m),
  error: (m) => console.error(m),
};
const CLAIM_REFUSALS = new Set(['stale', 'stopped', 'full']);

function checkJobId(jobId: string): void {
  if (!JOB_ID_PATTERN.test(jobId)) throw new InvalidJobIdError(jobId);
}

/**
 * A typed client of the master over NATS, for trainers, the CLI and anyone else: pull and claim
 * tasks, report them, ask a job's status, stop and submit jobs, and watch the jobs directory.
 */
export class MasterClient {
  private readonly js: JetStreamClient;
  private readonly consumers = new Map<string, Consumer>();
  private readonly logger: LineLogger;
  private readonly requestTimeoutMs: number;
  private readonly claimRetryBudgetMs: number;
  private readonly initialBackoffMs: number;
  private readonly jsReplicas: number;

  constructor(
    private readonly nc: NatsConnection,
    readonly trainerId: string,
    options: MasterClientOptions = {},
  ) {
    this.js = jetstream(nc);
    this.logger = options.logger ?? CONSOLE_LOGGER;
    this.requestTimeoutMs = options.requestTimeoutMs ?? MASTER_REQUEST_TIMEOUT_MS;
    this.claimRetryBudgetMs = options.claimRetryBudgetMs ?? CLAIM_RETRY_BUDGET_MS;
    this.initialBackoffMs = options.initialBackoffMs ?? RETRY_INITIAL_BACKOFF_MS;
    this.jsReplicas = options.jsReplicas ?? 1;
  }

  /**
   * Pulls task messages of `jobId` from its trainers' consumer one at a time, acking each at
   * once, until the master grants a claim on one. Stale claims and malformed messages are
   * skipped. Returns null when no task came within `timeoutMs`, when the master refused the
   * claim because the job stopped or has enough trainers, or when the signal fired; `pullTask`
   * says which.
   */
  async nextTask(jobId: string, options: NextTaskOptions = {}): Promise<ClaimedTask | null> {
    const pulled = await this.pullTask(jobId, options);
    return pulled.kind === 'claimed' ? pulled.task : null;
  }

  /**
   * Like `nextTask`, but says why no task came. A task message pulled (and so acked) after the
   * signal fired is handed back at once, so the master re-queues it without waiting for its
   * deadline.
   */
  async pullTask(jobId: string, options: NextTaskOptions = {}): Promise<TaskPull> {
    checkJobId(jobId);
    const deadline = Date.now() + (options.timeoutMs ?? NEXT_TASK_TIMEOUT_MS);
    const subject = SUBJECTS.tasks(jobId);
    const none = (reason: Extract<TaskPull, { kind: 'none' }>['reason']): TaskPull => ({ kind: 'none', reason });
    do {
      if (options.signal?.aborted) return none('aborted');
      const msg = await this.pullOne(jobId, Math.max(0, deadline - Date.now()), options.signal);
      if (msg === null) continue;
      await msg.ackAck().catch(() => msg.ack());
      let task: TaskMessage;
      try {
        task = parseTaskMessage(subject, msg.data);
      } catch (err) {
        this.logger.warn(`skipping task message #${msg.seq}: ${(err as Error).message}`);
        continue;
      }
      if (task.jobId !== jobId) {
        this.logger.warn(`skipping task message #${msg.seq}: it names job ${task.jobId}, not ${jobId}`);
        continue;
      }
      if (options.signal?.aborted) {
        await this.handBack(task, { budgetMs: ABORTED_HAND_BACK_BUDGET_MS }).catch(() => undefined);
        return none('aborted');
      }
      const reply = await this.claim(task, options.signal);
      if (reply === null) {
        if (options.signal?.aborted) {
          await this.handBack(task, { budgetMs: ABORTED_HAND_BACK_BUDGET_MS }).catch(() => undefined);
          return none('aborted');
        }
        return none('unreachable');
      }
      if (reply.ok) return { kind: 'claimed', task: { ...task, deadlineMs: reply.deadlineMs, leaseMs: reply.leaseMs } };
      if (reply.reason !== 'stale') {
        this.logger.log(`claim of task ${task.taskId} of job ${jobId} refused: ${reply.reason}`);
        return none(reply.reason);
      }
      this.logger.log(`dropping stale task ${task.taskId} (dispatch ${task.dispatchId}) of job ${jobId}`);
    } while (Date.now() < deadline);
    return none('no-task');
  }

  /** Reports a task done with the number of examples trained on; retries until the master replies. */
  reportDone(task: TaskMessage, samples: number, options?: ReportOptions): Promise<TaskReportReply> {
    return this.report(task, { outcome: 'done', samples }, options);
  }

  /** Reports a task failed with the reason; retries until the master replies. */
  reportFailed(task: TaskMessage, error: string, options?: ReportOptions): Promise<TaskReportReply> {
    return this.report(task, { outcome: 'failed', error }, options);
  }

  /** Hands a task back unfinished (preemption): it returns to todo with no failure counted. */
  handBack(task: TaskMessage, options?: ReportOptions): Promise<TaskReportReply> {
    return this.report(task, { outcome: 'returned' }, options);
  }

  /**
   * Claims again a task this trainer holds, so the master restarts its deadline: a long task,
   * or one waiting for the parameter servers, is not re-queued while its trainer lives.
   * `stale` or `stopped` means the task is no longer this trainer's (the master re-queued it
   * or the job stopped); `unreachable` that the master did not answer within the claim budget.
   */
  async renewClaim(task: TaskMessage, options: { signal?: AbortSignal } = {}): Promise<ClaimRenewal> {
    const reply = await this.claim(task, options.signal);
    return reply ?? { ok: false, reason: 'unreachable' };
  }

  /**
   * Tells the master that this process could not set up the run of a job that started at
   * `startedAt` (e.g. its model cannot be built); enough such reports fail the job. Retried
   * until the master answers or `signal` fires; resolves whether the report was counted.
   */
  async reportFault(
    jobId: string,
    startedAt: string,
    error: string,
    options: { signal?: AbortSignal; budgetMs?: number } = {},
  ): Promise<boolean> {
    const subject = SUBJECTS.jobFault(jobId);
    const body: JobFaultReport = { jobId, startedAt, source: this.trainerId, error };
    const data = await requestUntilReply(this.nc, subject, encodeJson(body), {
      requestTimeoutMs: this.requestTimeoutMs,
      initialBackoffMs: this.initialBackoffMs,
      signal: options.signal,
      budgetMs: options.budgetMs,
    });
    try {
      return decodeJsonObject(subject, data)['counted'] === true;
    } catch {
      return false;
    }
  }

  /**
   * Asks the master for a job's state and counters.
   * @throws JobUnknownToMasterError when the master does not know the job.
   * @throws MasterUnavailableError when no master answers in time.
   */
  async jobStatus(jobId: string, options: { timeoutMs?: number } = {}): Promise<JobStatusReply> {
    checkJobId(jobId);
    const subject = SUBJECTS.status(jobId);
    let data: Uint8Array;
    try {
      data = (await this.nc.request(subject, encodeJson({}), { timeout: options.timeoutMs ?? this.requestTimeoutMs }))
        .data;
    } catch (err) {
      throw new MasterUnavailableError(subject, (err as Error).message, { cause: err });
    }
    const obj = decodeJsonObject(subject, data);
    if (typeof obj['error'] === 'string') {
      if (obj['error'].startsWith('unknown job')) throw new JobUnknownToMasterError(jobId);
      throw new Error(`status of job ${jobId}: ${obj['error']}`);
    }
    if (typeof obj['state'] !== 'string' || typeof obj['epoch'] !== 'number') {
      throw new MalformedMessageError(subject, 'status reply lacks state or epoch');
    }
    return obj as unknown as JobStatusReply;
  }

  /**
   * Asks the master for its jobs: the running ones, or with `all` the stopped ones too (until
   * their retention runs out).
   * @throws MasterUnavailableError when no master answers in time.
   */
  async listJobs(options: { all?: boolean; timeoutMs?: number } = {}): Promise<JobListReply> {
    const subject = SUBJECTS.list;
    let data: Uint8Array;
    try {
      const body = encodeJson({ all: options.all === true });
      data = (await this.nc.request(subject, body, { timeout: options.timeoutMs ?? this.requestTimeoutMs })).data;
    } catch (err) {
      throw new MasterUnavailableError(subject, (err as Error).message, { cause: err });
    }
    const obj = decodeJsonObject(subject, data);
    if (typeof obj['error'] === 'string') throw new Error(`jobs list: ${obj['error']}`);
    if (!Array.isArray(obj['jobs'])) throw new MalformedMessageError(subject, 'jobs list reply lacks jobs');
    return obj as unknown as JobListReply;
  }

  /** Asks the master to stop a job; the request is kept by the control stream until it is taken. */
  async stopJob(jobId: string, reason: StopReason = 'manual', detail?: string): Promise<PubAck> {
    checkJobId(jobId);
    return this.js.publish(SUBJECTS.stop(jobId), encodeJson(detail === undefined ? { reason } : { reason, detail }));
  }

  /**
   * Submits a job spec: an object (sent as JSON), or the bytes or text of a spec file (sent as
   * is, so the master judges it). Resolves once the jobs stream has stored it.
   */
  async submitJob(spec: unknown): Promise<PubAck> {
    const payload =
      spec instanceof Uint8Array ? spec : typeof spec === 'string' ? new TextEncoder().encode(spec) : encodeJson(spec);
    return this.js.publish(SUBJECTS.submit, payload);
  }

  /** Watches the jobs bucket: current records first, then every change. */
  async watchJobs(): Promise<JobWatch> {
    const jobs = await openBucket(this.nc, KV_BUCKETS.jobs, this.jsReplicas);
    return watchJobRecords(jobs, this.logger);
  }

  /** Subscribes to a job's events as they are published (no replay); malformed ones are skipped. */
  events(jobId: string): EventSubscription {
    checkJobId(jobId);
    const subject = SUBJECTS.events(jobId);
    const sub = this.nc.subscribe(subject);
    const logger = this.logger;
    async function* events(): AsyncGenerator<JobEvent> {
      for await (const msg of sub) {
        try {
          const obj = decodeJsonObject(subject, msg.data);
          if (typeof obj['type'] !== 'string') throw new MalformedMessageError(subject, 'type: expected a string');
          yield obj as unknown as JobEvent;
        } catch (err) {
          logger.warn(`skipping event: ${(err as Error).message}`);
        }
      }
    }
    const generator = events();
    return { [Symbol.asyncIterator]: () => generator, stop: () => sub.unsubscribe() };
  }

  /** Pulls at most one message, waiting up to `waitMs` (at least the server's minimum pull). */
  private async pullOne(jobId: string, waitMs: number, signal?: AbortSignal): Promise<JsMsg | null> {
    let consumer = this.consumers.get(jobId);
    if (consumer === undefined) {
      try {
        consumer = await this.js.consumers.get(STREAMS.tasks.name, CONSUMERS.trainers(jobId));
        this.consumers.set(jobId, consumer);
      } catch {
        // The master creates the consumer when it starts the job; until then there is nothing to pull.
        await sleep(Math.min(waitMs, this.initialBackoffMs), signal);
        return null;
      }
    }
    try {
      return await consumer.next({ expires: Math.max(MIN_PULL_EXPIRES_MS, waitMs) });
    } catch (err) {
      this.consumers.delete(jobId);
      this.logger.warn(`pulling a task of job ${jobId} failed: ${(err as Error).message}`);
      await sleep(Math.min(waitMs, this.initialBackoffMs), signal);
      return null;
    }
  }

  /** Claims a pulled task; null when the master could not be reached within the claim budget. */
  private async claim(task: TaskMessage, signal?: AbortSignal): Promise<TaskClaimReply | null> {
    const subject = SUBJECTS.taskClaim(task.jobId);
    const body: TaskClaim = {
      jobId: task.jobId,
      taskId: task.taskId,
      epoch: task.epoch,
      dispatchId: task.dispatchId,
      trainerId: this.trainerId,
    };
    let data: Uint8Array;
    try {
      data = await requestUntilReply(this.nc, subject, encodeJson(body), {
        requestTimeoutMs: this.requestTimeoutMs,
        budgetMs: this.claimRetryBudgetMs,
        initialBackoffMs: this.initialBackoffMs,
        signal,
      });
    } catch (err) {
      this.logger.warn(`claim of task ${task.taskId} of job ${task.jobId} given up: ${(err as Error).message}`);
      return null;
    }
    try {
      const obj = decodeJsonObject(subject, data);
      if (obj['ok'] === true && typeof obj['deadlineMs'] === 'number') {
        const deadlineMs = obj['deadlineMs'];
        // A master that does not say its lease (an older one) granted the claim until its deadline.
        const leaseMs = typeof obj['leaseMs'] === 'number' ? obj['leaseMs'] : Math.max(0, deadlineMs - Date.now());
        return { ok: true, deadlineMs, leaseMs };
      }
      if (obj['ok'] === false && typeof obj['reason'] === 'string' && CLAIM_REFUSALS.has(obj['reason'])) {
        return { ok: false, reason: obj['reason'] as 'stale' | 'stopped' | 'full' };
      }
      throw new MalformedMessageError(subject, `unexpected claim reply ${JSON.stringify(obj)}`);
    } catch (err) {
      this.logger.warn(`claim of task ${task.taskId} of job ${task.jobId}: ${(err as Error).message}; dropping it`);
      return { ok: false, reason: 'stale' };
    }
  }

  private async report(
    task: TaskMessage,
    outcome: Pick<TaskReport, 'outcome' | 'error' | 'samples'>,
    options: ReportOptions = {},
  ): Promise<TaskReportReply> {
    const subject = SUBJECTS.taskReport(task.jobId);
    const body: TaskReport = {
      jobId: task.jobId,
      taskId: task.taskId,
      epoch: task.epoch,
      dispatchId: task.dispatchId,
      trainerId: this.trainerId,
      ...outcome,
    };
    const data = await requestUntilReply(this.nc, subject, encodeJson(body), {
      requestTimeoutMs: this.requestTimeoutMs,
      initialBackoffMs: this.initialBackoffMs,
      signal: options.signal,
      budgetMs: options.budgetMs,
      onRetry: (attempt, err) => {
        if (attempt === 1 || attempt % 10 === 0) {
          this.logger.warn(`report of task ${task.taskId} of job ${task.jobId} unanswered (${err.message}); retrying`);
        }
      },
    });
    try {
      const obj = decodeJsonObject(subject, data);
      return {
        ok: obj['ok'] === true,
        counted: obj['counted'] === true,
        ...(typeof obj['error'] === 'string' ? { error: obj['error'] } : {}),
      };
    } catch (err) {
      return { ok: false, counted: false, error: (err as Error).message };
    }
  }
}
