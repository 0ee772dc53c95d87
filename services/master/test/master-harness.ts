import 'reflect-metadata';
import { tmpdir } from 'node:os';
import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { jetstream, type Consumer, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readServiceConfig } from '#libs/config';
import {
  CONSUMERS,
  KV_BUCKETS,
  STREAMS,
  SUBJECTS,
  decodeJsonObject,
  encodeJson,
  type JobEvent,
  type JobStatusReply,
  type TaskClaimReply,
  type TaskMessage,
  type TaskReport,
  type TaskReportReply,
} from '#libs/messaging';
import { Compressor, RecordWriter } from '#libs/recordio';
import { ConnectionsModule } from '#libs/service-runtime';
import { sleep } from '#libs/retry';
import { MASTER_CONFIG } from '../src/master-config.js';
import { MasterModule } from '../src/master.module.js';

/** Starts a master in-process against the given servers, as `nest start master` would. */
export async function startMaster(
  natsUrl: string,
  redisUrl: string,
  keyPrefix: string,
  options: { id?: string; leaseTtlMs?: number; env?: Record<string, string> } = {},
): Promise<INestApplicationContext> {
  const env = {
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    MASTER_KEY_PREFIX: keyPrefix,
    MASTER_TICK_MS: '100',
    LOG_LEVEL: 'warn',
    // Tests keep their data sets and outputs in temporary directories.
    TRIBUTARY_DATA_ROOT: tmpdir(),
    TRIBUTARY_OUTPUT_ROOT: tmpdir(),
    ...(options.leaseTtlMs !== undefined ? { MASTER_LEASE_TTL_MS: String(options.leaseTtlMs) } : {}),
    ...options.env,
  };
  const config = { ...readServiceConfig(MASTER_CONFIG, env), id: options.id ?? `master-test-${process.pid}` };
  const app = await NestFactory.createApplicationContext(
    {
      module: class MasterTestRoot {},
      imports: [ConnectionsModule.forRoot(config, 'master'), MasterModule.forRoot(config)],
    },
    { logger: ['error'], abortOnError: false },
  );
  await app.init();
  return app;
}

/** Writes `records` small records into `files` RecordIO files, about four records per chunk. */
export async function writeDataset(dir: string, files: number, records: number): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (let f = 0; f < files; f += 1) {
    const writer = await RecordWriter.open(join(dir, `train-${f}.recordio`), {
      maxChunkSizeBytes: 64,
      compressor: Compressor.None,
    });
    for (let i = 0; i < records / files; i += 1) await writer.write(new Uint8Array(16).fill(i));
    await writer.close();
  }
}

/** A small valid job spec over the dataset in `dir`. */
export function jobSpec(id: string, dir: string, extra: { stop?: object; training?: object; trainers?: object } = {}) {
  return {
    id,
    dataset: {
      train: [join(dir, 'train-*.recordio')],
      eval: [join(dir, 'train-*.recordio')],
      layout: { featureShape: [3], featureDtype: 'float32', labelDtype: 'float32' },
    },
    model: { preset: 'mlp', hiddenUnits: [4] },
    optimizer: { type: 'sgd', learningRate: 0.1 },
    training: { batchSize: 2, chunksPerTask: 1, taskTimeout: { floorMs: 1000 }, ...extra.training },
    trainers: extra.trainers,
    stop: extra.stop ?? { maxEpochs: 2 },
    output: join(dir, 'out', id),
  };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Every job event published while it listens. */
export class EventLog {
  readonly events: JobEvent[] = [];
  private readonly sub: Subscription;

  constructor(nc: NatsConnection) {
    this.sub = nc.subscribe(SUBJECTS.allEvents, {
      callback: (_err, msg) => {
        this.events.push(decodeJsonObject(msg.subject, msg.data) as unknown as JobEvent);
      },
    });
  }

  of(jobId: string, type?: JobEvent['type']): JobEvent[] {
    return this.events.filter((e) => e.jobId === jobId && (type === undefined || e.type === type));
  }

  /** Waits for an event of the job of that type, and returns it. */
  waitFor<T extends JobEvent['type']>(
    jobId: string,
    type: T,
    timeoutMs?: number,
  ): Promise<Extract<JobEvent, { type: T }>> {
    return eventually(
      `${type} event of ${jobId}`,
      () => this.of(jobId, type)[0] as Extract<JobEvent, { type: T }> | undefined,
      timeoutMs,
    );
  }

  stop(): void {
    this.sub.unsubscribe();
  }
}

/** A trainer made of plain NATS calls: pull from `trainers-<jobId>`, claim, report. */
export class FakeTrainer {
  private readonly js: JetStreamClient;
  private readonly consumers = new Map<string, Consumer>();
  private members: KV | undefined;
  private beacon: NodeJS.Timeout | undefined;

  constructor(
    readonly nc: NatsConnection,
    readonly id: string,
  ) {
    this.js = jetstream(nc);
  }

  static async connect(natsUrl: string, id: string): Promise<FakeTrainer> {
    // Back within a quarter second of a NATS restart, as the tests' own connections are: a
    // claim re-armed by the master when NATS returns must not run out while this one waits.
    return new FakeTrainer(await connect({ servers: natsUrl, maxReconnectAttempts: -1, reconnectTimeWait: 250 }), id);
  }

  /** Shows up in the members bucket, so the master counts this trainer as alive. */
  async register(): Promise<void> {
    this.members = await new Kvm(this.nc).create(KV_BUCKETS.members, { history: 1, ttl: 15_000 });
    const put = () =>
      this.members!.put(
        `trainer.${this.id}`,
        encodeJson({
          role: 'trainer',
          id: this.id,
          pid: process.pid,
          host: 'test',
          state: 'idle',
          at: new Date().toISOString(),
        }),
      ).catch(() => undefined);
    await put();
    this.beacon = setInterval(put, 2000);
  }

  /** Pulls one task message (acked at once), or null when none comes within `expiresMs`. */
  async pull(jobId: string, expiresMs = 1000): Promise<TaskMessage | null> {
    let consumer = this.consumers.get(jobId);
    if (consumer === undefined) {
      consumer = await this.js.consumers.get(STREAMS.tasks.name, CONSUMERS.trainers(jobId));
      this.consumers.set(jobId, consumer);
    }
    const msg = await consumer.next({ expires: expiresMs });
    if (msg === null) return null;
    msg.ack();
    return JSON.parse(new TextDecoder().decode(msg.data)) as TaskMessage;
  }

  async claim(task: TaskMessage): Promise<TaskClaimReply> {
    const { jobId, taskId, epoch, dispatchId } = task;
    return (await this.request(SUBJECTS.taskClaim(jobId), {
      jobId,
      taskId,
      epoch,
      dispatchId,
      trainerId: this.id,
    })) as unknown as TaskClaimReply;
  }

  async report(
    task: TaskMessage,
    outcome: TaskReport['outcome'],
    extra: Partial<TaskReport> = {},
  ): Promise<TaskReportReply> {
    const { jobId, taskId, epoch, dispatchId } = task;
    const report: TaskReport = { jobId, taskId, epoch, dispatchId, trainerId: this.id, outcome, ...extra };
    return (await this.request(SUBJECTS.taskReport(jobId), report)) as unknown as TaskReportReply;
  }

  /** Pulls, claims and reports done until `until` says stop or no task comes for a while. */
  async work(jobId: string, until: () => boolean, onTask?: (task: TaskMessage) => Promise<boolean>): Promise<number> {
    let done = 0;
    let idle = 0;
    while (!until() && idle < 5) {
      const task = await this.pull(jobId, 1000);
      if (task === null) {
        idle += 1;
        continue;
      }
      idle = 0;
      const claim = await this.claim(task);
      if (!claim.ok) continue;
      if (onTask && !(await onTask(task))) continue;
      const reply = await this.report(task, 'done', { samples: 4 });
      if (reply.counted) done += 1;
    }
    return done;
  }

  /**
   * How long an unanswered request (no responder, or no reply in time) is sent again, as a
   * real trainer does while masters change; 0 (the default) fails at the first miss.
   */
  retryForMs = 0;

  async request(subject: string, body: unknown): Promise<Record<string, unknown>> {
    const payload = typeof body === 'string' || body instanceof Uint8Array ? body : encodeJson(body);
    const giveUpAt = Date.now() + this.retryForMs;
    for (;;) {
      try {
        const reply = await this.nc.request(subject, payload, { timeout: this.retryForMs > 0 ? 1000 : 5000 });
        return decodeJsonObject(subject, reply.data);
      } catch (err) {
        if (Date.now() >= giveUpAt) throw err;
        await sleep(100);
      }
    }
  }

  async status(jobId: string): Promise<JobStatusReply & { error?: string }> {
    return (await this.request(SUBJECTS.status(jobId), {})) as unknown as JobStatusReply;
  }

  async close(): Promise<void> {
    clearInterval(this.beacon);
    await this.members?.delete(`trainer.${this.id}`).catch(() => undefined);
    await this.nc.close();
  }
}
