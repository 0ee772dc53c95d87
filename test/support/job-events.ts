import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import { STREAMS, SUBJECTS, type JobEvent, type NatsConnection } from '#libs/messaging';
import { sleep } from '#libs/retry';

/**
 * Replays a job's events from the events stream (so none is missed, whenever the test starts
 * listening) until `until` matches one, and returns every event seen up to it.
 */
export async function waitForEvent(
  nc: NatsConnection,
  jobId: string,
  until: (e: JobEvent) => boolean,
  timeoutMs = 120_000,
): Promise<JobEvent[]> {
  const deadline = Date.now() + timeoutMs;
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
  const timer = setTimeout(() => void messages.close(), Math.max(0, deadline - Date.now()));
  try {
    for await (const m of messages) {
      const e = m.json<JobEvent>();
      seen.push(e);
      if (until(e)) return seen;
    }
  } finally {
    clearTimeout(timer);
    await messages.close().catch(() => undefined);
  }
  throw new Error(`job ${jobId}: no matching event within ${timeoutMs} ms; saw ${seen.map((e) => e.type).join(', ')}`);
}
