import type { LineLogger } from '#libs/logging';
import {
  MalformedMessageError,
  SUBJECTS,
  decodeJsonObject,
  numberField,
  stringField,
  type NatsConnection,
  type RoundNotice,
} from '#libs/messaging';

/**
 * A round notice as it came on `subject`: the job's id, and the shard and version as
 * non-negative integers.
 * @throws MalformedMessageError naming the subject and the field.
 */
export function decodeRoundNotice(subject: string, data: Uint8Array): RoundNotice {
  const body = decodeJsonObject(subject, data);
  const count = (field: string): number => {
    const v = numberField(subject, body, field);
    if (!Number.isInteger(v) || v < 0) throw new MalformedMessageError(subject, `${field}: expected an integer >= 0`);
    return v;
  };
  return { jobId: stringField(subject, body, 'jobId'), shard: count('shard'), version: count('version') };
}

/**
 * Listens to job `jobId`'s round notices (`SUBJECTS.rounds`) until the returned function is
 * called. A notice that cannot be read is logged and dropped; the round then ends as it would
 * without it.
 */
export function watchRoundNotices(
  nc: NatsConnection,
  jobId: string,
  onNotice: (notice: RoundNotice) => void,
  logger: LineLogger,
): () => void {
  const subject = SUBJECTS.rounds(jobId);
  const sub = nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      let notice: RoundNotice;
      try {
        notice = decodeRoundNotice(msg.subject, msg.data);
      } catch (error) {
        logger.warn(`job ${jobId}: ignoring a round notice: ${(error as Error).message}`);
        return;
      }
      if (notice.jobId === jobId) onNotice(notice);
    },
  });
  return () => sub.unsubscribe();
}
