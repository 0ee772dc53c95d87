import type { KV } from '@nats-io/kv';
import { MasterClient, type EventSubscription } from '#libs/master-client';
import type { JobEvent, MemberStatus, NatsConnection } from '#libs/messaging';
import { PserverClient, shardKey } from '#libs/pserver-client';
import { sleep } from '#libs/retry';

/** How often every shard's version is sampled over gRPC `Status`. */
export const VERSION_SAMPLE_MS = 200;
/** Deadline of one `Status` call; a shard that does not answer in time is skipped for that sample. */
export const VERSION_CALL_TIMEOUT_MS = 1_000;
/** How often a waiting condition is looked at again. */
const POLL_MS = 100;

/** A sample of a shard that was lower than an earlier one. */
export interface VersionDecrease {
  shard: number;
  from: number;
  to: number;
  /** Epoch ms of the lower sample. */
  at: number;
}

/** A wait for the job to get somewhere did not end in time, or the job ended first. */
export class ChaosWaitError extends Error {
  override readonly name = 'ChaosWaitError';
}

/**
 * Polls `check` every {@link POLL_MS} until it returns a value other than undefined; throws a
 * `ChaosWaitError` built from `describe()` after `timeoutMs`, or at once when `abort()` names a
 * reason (the job stopped, say).
 */
export async function waitUntil<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs: number,
  options: { describe?: () => string; abort?: () => string | undefined } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    const aborted = options.abort?.();
    if (aborted) throw new ChaosWaitError(`${what}: ${aborted}${options.describe ? `; ${options.describe()}` : ''}`);
    if (Date.now() > deadline) {
      throw new ChaosWaitError(
        `${what}: not within ${timeoutMs} ms${options.describe ? `; ${options.describe()}` : ''}`,
      );
    }
    await sleep(POLL_MS);
  }
}

/**
 * Samples the version of each shard of one job every {@link VERSION_SAMPLE_MS} through the
 * shard's gRPC `Status`, finding the shard's current address in the pservers bucket (a restarted
 * pserver registers a new one). Only shards that hold the job's parameters (initialized) count.
 * Records every decrease, so a test can assert the versions only ever went up.
 */
export class ShardVersionWatch {
  private readonly latestVersions: number[];
  private readonly highest: number[];
  private readonly decreasesSeen: VersionDecrease[] = [];
  private readonly clients = new Map<number, PserverClient>();
  private readonly addresses = new Map<number, string>();
  private running = false;
  private loops: Promise<void>[] = [];
  /** Samples taken, over all shards. */
  samples = 0;

  constructor(
    private readonly pservers: KV,
    private readonly jobId: string,
    readonly shards: number,
  ) {
    this.latestVersions = Array.from({ length: shards }, () => -1);
    this.highest = Array.from({ length: shards }, () => -1);
  }

  /** Starts one sampling loop per shard. */
  start(): void {
    this.running = true;
    this.loops = this.latestVersions.map((_, shard) => this.sampleLoop(shard));
  }

  /** Stops sampling and closes the gRPC channels. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  /** The last sampled version of each shard (-1 before the first). */
  latest(): number[] {
    return [...this.latestVersions];
  }

  /** The highest version sampled over all shards (-1 before the first). */
  max(): number {
    return Math.max(...this.highest);
  }

  /** Every sample lower than an earlier sample of the same shard. */
  decreases(): VersionDecrease[] {
    return [...this.decreasesSeen];
  }

  /**
   * Resolves once every shard was sampled above `threshold`.
   * @throws ChaosWaitError after `timeoutMs`, or when `abort` names a reason.
   */
  async waitAbove(threshold: number, timeoutMs: number, abort?: () => string | undefined): Promise<number[]> {
    return waitUntil(
      `job ${this.jobId}: every shard's version above ${threshold}`,
      () => (this.latestVersions.every((v) => v > threshold) ? this.latest() : undefined),
      timeoutMs,
      { describe: () => `shard versions now ${JSON.stringify(this.latestVersions)}`, abort },
    );
  }

  private async sampleLoop(shard: number): Promise<void> {
    while (this.running) {
      const started = Date.now();
      const version = await this.sample(shard).catch(() => undefined);
      if (version !== undefined) this.record(shard, version);
      await sleep(Math.max(0, VERSION_SAMPLE_MS - (Date.now() - started)));
    }
  }

  private record(shard: number, version: number): void {
    this.samples += 1;
    if (version < this.highest[shard]) {
      this.decreasesSeen.push({ shard, from: this.highest[shard], to: version, at: Date.now() });
    }
    this.latestVersions[shard] = version;
    this.highest[shard] = Math.max(this.highest[shard], version);
  }

  private async sample(shard: number): Promise<number | undefined> {
    const client = await this.client(shard);
    if (!client) return undefined;
    const reply = await client.status(this.jobId);
    const job = reply.jobs.find((j) => j.jobId === this.jobId);
    return job?.initialized ? job.version : undefined;
  }

  private async client(shard: number): Promise<PserverClient | undefined> {
    const address = await this.address(shard);
    if (!address) return undefined;
    const current = this.clients.get(shard);
    if (current?.address === address) return current;
    current?.close();
    const client = new PserverClient(address, { shard, callTimeoutMs: VERSION_CALL_TIMEOUT_MS });
    this.clients.set(shard, client);
    return client;
  }

  /** The registered address, or the last one known while the bucket cannot be read. */
  private async address(shard: number): Promise<string | undefined> {
    try {
      const entry = await this.pservers.get(shardKey(shard));
      if (entry && entry.operation === 'PUT') {
        const address = (entry.json() as { address?: unknown }).address;
        if (typeof address === 'string') this.addresses.set(shard, address);
      }
    } catch {
      // NATS is down or restarting: keep sampling the address we knew.
    }
    return this.addresses.get(shard);
  }
}

/** The master's status as last seen, with the time it was answered. */
/** An event with the time this process received it. */
export interface SeenEvent {
  event: JobEvent;
  at: number;
}

/**
 * Keeps every event of one job published while it listens (a plain subscription, so it comes
 * back by itself after a NATS restart; events published during the restart may be missed, which
 * waits tolerate by waiting for the next one).
 */
export class JobEventTap {
  readonly seen: SeenEvent[] = [];
  private readonly subscription: EventSubscription;

  constructor(nc: NatsConnection, jobId: string) {
    const client = new MasterClient(nc, `chaos-events-${process.pid}`, {
      logger: { log: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const subscription = client.events(jobId);
    this.subscription = subscription;
    void (async () => {
      for await (const event of subscription) this.seen.push({ event, at: Date.now() });
    })().catch(() => undefined);
  }

  /** The first event seen of this type, if any. */
  first<T extends JobEvent['type']>(type: T): Extract<JobEvent, { type: T }> | undefined {
    return this.seen.find((s) => s.event.type === type)?.event as Extract<JobEvent, { type: T }> | undefined;
  }

  /** Why waits should give up: the job stopped or failed. */
  ended(): string | undefined {
    const end = this.seen.find((s) => s.event.type === 'stopped' || s.event.type === 'failed')?.event;
    if (!end) return undefined;
    return end.type === 'stopped'
      ? `the job stopped (${end.reason}${end.detail ? `: ${end.detail}` : ''})`
      : `the job failed: ${end.type === 'failed' ? end.error : ''}`;
  }

  /** Resolves with the first event matching `match` received after `since` (epoch ms). */
  async waitFor(
    what: string,
    match: (e: JobEvent) => boolean,
    since: number,
    timeoutMs: number,
    abort?: () => string | undefined,
  ) {
    return waitUntil(what, () => this.seen.find((s) => s.at >= since && match(s.event)), timeoutMs, {
      describe: () =>
        `events since: ${
          this.seen
            .filter((s) => s.at >= since)
            .map((s) => s.event.type)
            .join(', ') || 'none'
        }`,
      abort,
    });
  }

  /** Stops listening. */
  stop(): void {
    this.subscription.stop();
  }
}

/**
 * The pid of the master that leads, as its entry in the members bucket says: `leader: true`,
 * refreshed at or after `freshSince` (epoch ms), and one of `candidatePids`.
 */
export async function leaderMasterPid(
  members: KV,
  candidatePids: number[],
  freshSince = 0,
): Promise<number | undefined> {
  for await (const key of await members.keys('master.>')) {
    const entry = await members.get(key);
    if (!entry || entry.operation !== 'PUT') continue;
    let member: MemberStatus;
    try {
      member = entry.json() as MemberStatus;
    } catch {
      continue;
    }
    if (member.leader !== true || !candidatePids.includes(member.pid)) continue;
    if (Date.parse(member.at) < freshSince) continue;
    return member.pid;
  }
  return undefined;
}
