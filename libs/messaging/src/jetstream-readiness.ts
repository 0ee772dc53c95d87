import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { sleep } from '#libs/retry';

/** How long to wait for JetStream to answer before giving up (a cluster electing its meta leader). */
export const JETSTREAM_READY_TIMEOUT_MS = 60_000;
/** Pause between two JetStream readiness probes. */
export const JETSTREAM_READY_POLL_MS = 250;

/** JetStream did not answer an account info request within the time allowed. */
export class JetStreamUnavailableError extends Error {
  override readonly name = 'JetStreamUnavailableError';
}

/**
 * Resolves with a JetStream manager once JetStream answers an account info request. A NATS
 * cluster that has just started (or lost its meta leader) refuses JetStream requests for a few
 * seconds; one server with JetStream answers at once.
 * @throws JetStreamUnavailableError naming the last refusal after `timeoutMs`.
 */
export async function waitForJetStream(
  nc: NatsConnection,
  timeoutMs = JETSTREAM_READY_TIMEOUT_MS,
): Promise<JetStreamManager> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const jsm = await jetstreamManager(nc, { checkAPI: false });
      await jsm.getAccountInfo();
      return jsm;
    } catch (cause) {
      if (Date.now() >= deadline) {
        throw new JetStreamUnavailableError(
          `JetStream did not answer within ${timeoutMs} ms (${(cause as Error).message}); is the server started with JetStream, and has its cluster a quorum?`,
          { cause },
        );
      }
      await sleep(JETSTREAM_READY_POLL_MS);
    }
  }
}
