import { DeliverPolicy, jetstream, type ConsumerMessages } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { LineLogger } from '#libs/logging';
import { MasterClient } from '#libs/master-client';
import {
  KV_BUCKETS,
  STREAMS,
  SUBJECTS,
  watchBucket,
  type BucketWatch,
  type JobEvent,
  type MemberStatus,
  type NatsConnection,
} from '#libs/messaging';
import { sleep } from '#libs/retry';
import type { DashboardState } from './dashboard-state.js';

/** How often the master is asked for the job list and the running jobs' status. */
export const DASHBOARD_POLL_MS = 1_000;
/** Pause before the events consumer is opened again after it failed. */
const EVENTS_REOPEN_DELAY_MS = 1_000;

/** Pause between two tries to bind the members bucket before the cluster declared it. */
const MEMBERS_BUCKET_RETRY_MS = 1_000;

/** A running feed: `stop()` ends every watch and poll (the connection stays the caller's). */
export interface NatsFeed {
  stop(): Promise<void>;
}

/** Options of {@link startNatsFeed}. */
export interface NatsFeedOptions {
  pollMs?: number;
  logger?: LineLogger;
}

/**
 * Feeds `state` from NATS: the connection's state, every job event (the events stream replayed
 * from its start, then live), the members bucket, and the master's job list and each active
 * job's status, polled. Each part survives a NATS restart: the connection reconnects, the
 * events consumer is opened again after the last event seen, the bucket watch reopens.
 */
export async function startNatsFeed(
  nc: NatsConnection,
  state: DashboardState,
  options: NatsFeedOptions = {},
): Promise<NatsFeed> {
  const pollMs = options.pollMs ?? DASHBOARD_POLL_MS;
  const logger = options.logger;
  let stopping = false;
  const membersBucket = await bindMembersBucket(nc, logger);
  state.setConnected(!nc.isClosed());

  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') state.setConnected(false);
      if (s.type === 'reconnect') state.setConnected(true);
    }
  })().catch(() => undefined);

  const members: BucketWatch = await watchBucket(membersBucket, { name: 'members watch', logger });
  const membersLoop = (async () => {
    for await (const entry of members) {
      if (entry.operation !== 'PUT') {
        state.onMember(entry.key, undefined);
        continue;
      }
      try {
        state.onMember(entry.key, entry.json<MemberStatus>());
      } catch {
        // A malformed entry is not ours to show.
      }
    }
  })();

  const js = jetstream(nc);
  let lastSeq = 0;
  let messages: ConsumerMessages | undefined;
  const eventsLoop = (async () => {
    while (!stopping) {
      try {
        const consumer = await js.consumers.get(STREAMS.events.name, {
          filter_subjects: SUBJECTS.allEvents,
          ...(lastSeq > 0
            ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: lastSeq + 1 }
            : { deliver_policy: DeliverPolicy.All }),
        });
        messages = await consumer.consume();
        if (stopping) void messages.close();
        for await (const m of messages) {
          if (m.seq <= lastSeq) continue;
          lastSeq = m.seq;
          try {
            state.onEvent(m.json<JobEvent>());
          } catch {
            // Not an event of ours.
          }
        }
      } catch (err) {
        if (stopping) break;
        logger?.warn(`events consumer failed (${(err as Error).message}); opening it again`);
      }
      if (!stopping) await sleep(EVENTS_REOPEN_DELAY_MS);
    }
  })();

  const client = new MasterClient(nc, 'tributary-dashboard', { logger });
  const finishedRead = new Set<string>();
  let pollTimer: NodeJS.Timeout | undefined;
  const poll = async () => {
    try {
      const { jobs } = await client.listJobs({ all: true, timeoutMs: Math.max(pollMs, 2_000) });
      state.setMasterAnswering(true);
      state.onJobList(jobs);
      // Active jobs on every poll; a finished run once, for its final accounting.
      const wanted = jobs.filter(
        (j) => j.state === 'running' || j.state === 'waiting' || !finishedRead.has(`${j.jobId} ${j.startedAt}`),
      );
      await Promise.all(
        wanted.map((j) =>
          client
            .jobStatus(j.jobId, { timeoutMs: Math.max(pollMs, 2_000) })
            .then((s) => {
              state.onJobStatus(s);
              if (s.state === 'stopped' || s.state === 'failed') finishedRead.add(`${j.jobId} ${j.startedAt}`);
            })
            .catch(() => undefined),
        ),
      );
    } catch {
      state.setMasterAnswering(false);
    }
    if (!stopping) pollTimer = setTimeout(() => void poll(), pollMs);
  };
  void poll();

  return {
    async stop() {
      stopping = true;
      clearTimeout(pollTimer);
      members.stop();
      // A consume iterator's close settles only when it is next iterated; the loop does that.
      messages?.close().catch(() => undefined);
      await Promise.race([Promise.all([membersLoop, eventsLoop]), sleep(2_000)]);
    },
  };
}

/**
 * The members bucket, bound without creating it: the dashboard only reads, `tributary up` and
 * every service declare the buckets, and a secured cluster's operator may not declare them.
 * Waits for a cluster that has not declared it yet, saying so once.
 */
async function bindMembersBucket(nc: NatsConnection, logger?: LineLogger): Promise<KV> {
  for (let said = false; ; said = true) {
    try {
      return await new Kvm(nc).open(KV_BUCKETS.members);
    } catch (err) {
      if (!said)
        logger?.warn(`no members bucket yet (${(err as Error).message}); waiting for the cluster to declare it`);
      await sleep(MEMBERS_BUCKET_RETRY_MS);
    }
  }
}
