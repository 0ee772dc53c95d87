import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { STREAMS, SUBJECTS, type JobEvent, type NatsConnection } from '#libs/messaging';
import { sleep } from '#libs/retry';

/**
 * How long a replay of a job's events may go without a message before it is started again. A
 * consumer of a replicated events stream that a NATS node's death left without its leader can
 * stay silent for good (once, a test waited out its whole limit on one while the job had long
 * stopped); a new one finds the new leader.
 */
const SILENT_REPLAY_MS = 20_000;

/** What a test's last wait leaves of the test's limit, for the failure's message and the clean-up. */
export const LAST_WAIT_MARGIN_MS = 30_000;

/**
 * For a test of `testTimeoutMs` starting now: the milliseconds its waits may still take, ending
 * {@link LAST_WAIT_MARGIN_MS} before the test's own limit, so a failed wait says what it saw
 * rather than the test runner's bare timeout.
 */
export function waitBudget(testTimeoutMs: number): () => number {
  const endsAt = Date.now() + testTimeoutMs - LAST_WAIT_MARGIN_MS;
  return () => Math.max(0, endsAt - Date.now());
}

/**
 * Replays a job's events from the events stream (so none is missed, whenever the test starts
 * listening) until `until` matches one, and returns every event seen up to it. A replay silent
 * for {@link SILENT_REPLAY_MS} starts over from the first event.
 */
export async function waitForEvent(
  nc: NatsConnection,
  jobId: string,
  until: (e: JobEvent) => boolean,
  timeoutMs = 120_000,
): Promise<JobEvent[]> {
  const deadline = Date.now() + timeoutMs;
  let seen: JobEvent[] = [];
  let replays = 0;
  while (Date.now() < deadline) {
    replays += 1;
    const last = await replay(nc, jobId, until, deadline);
    seen = last.seen;
    if (last.matched) return seen;
  }
  throw new Error(
    `job ${jobId}: no matching event within ${timeoutMs} ms (${replays} replays); saw ${seen.map((e) => e.type).join(', ')}`,
  );
}

/**
 * One replay of a job's events until `until` matches one (`matched`), it goes silent for
 * {@link SILENT_REPLAY_MS}, or the deadline passes; with the events it saw.
 */
async function replay(
  nc: NatsConnection,
  jobId: string,
  until: (e: JobEvent) => boolean,
  deadline: number,
): Promise<{ matched: boolean; seen: JobEvent[] }> {
  // Right after a NATS restart a JetStream request may time out: ask again until the deadline.
  const consumer = await (async () => {
    for (;;) {
      try {
        return await jetstream(nc).consumers.get(STREAMS.events.name, {
          filter_subjects: SUBJECTS.events(jobId),
          deliver_policy: DeliverPolicy.All,
        });
      } catch (err) {
        if (Date.now() > deadline) throw err;
        await sleep(250);
      }
    }
  })();
  const messages = await consumer.consume();
  const seen: JobEvent[] = [];
  let timer: NodeJS.Timeout | undefined;
  const closeWhenSilent = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => void messages.close(), Math.max(0, Math.min(SILENT_REPLAY_MS, deadline - Date.now())));
  };
  closeWhenSilent();
  try {
    for await (const m of messages) {
      closeWhenSilent();
      const e = m.json<JobEvent>();
      seen.push(e);
      if (until(e)) return { matched: true, seen };
    }
    return { matched: false, seen };
  } finally {
    clearTimeout(timer);
    await messages.close().catch(() => undefined);
  }
}
