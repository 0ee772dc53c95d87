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
    const matched = await replay(nc, jobId, until, deadline, (events) => (seen = events));
    if (matched) return seen;
  }
  throw new Error(
    `job ${jobId}: no matching event within ${timeoutMs} ms (${replays} replays); saw ${seen.map((e) => e.type).join(', ')}`,
  );
}

/**
 * One replay of a job's events until `until` matches one (true), it goes silent for
 * {@link SILENT_REPLAY_MS}, or the deadline passes (false). `report` gets the events seen so far.
 */
async function replay(
  nc: NatsConnection,
  jobId: string,
  until: (e: JobEvent) => boolean,
  deadline: number,
  report: (seen: JobEvent[]) => void,
): Promise<boolean> {
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
  report(seen);
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
      if (until(e)) return true;
    }
    return false;
  } finally {
    clearTimeout(timer);
    await messages.close().catch(() => undefined);
  }
}
