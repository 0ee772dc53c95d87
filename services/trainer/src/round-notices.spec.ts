import {
  MalformedMessageError,
  SUBJECTS,
  connectNats,
  encodeJson,
  type NatsConnection,
  type RoundNotice,
} from '#libs/messaging';
import { startTestServers, type TestServers } from '../../../test/support/servers.js';
import { decodeRoundNotice, watchRoundNotices } from './round-notices.js';

const SUBJECT = SUBJECTS.rounds('job-r');
const bytes = (value: unknown) => encodeJson(value);

describe('round notices', () => {
  it('round notices - a notice reads as its job, shard and version', () => {
    expect(decodeRoundNotice(SUBJECT, bytes({ jobId: 'job-r', shard: 1, version: 41 }))).toEqual({
      jobId: 'job-r',
      shard: 1,
      version: 41,
    });
  });

  it.each([
    [{ jobId: 'job-r', shard: -1, version: 4 }, 'shard: expected an integer >= 0'],
    [{ jobId: 'job-r', shard: 0, version: 1.5 }, 'version: expected an integer >= 0'],
    [{ jobId: 'job-r', shard: 0 }, 'version: expected a number'],
    [{ shard: 0, version: 2 }, 'jobId: expected a non-empty string'],
    [{ jobId: '', shard: 0, version: 2 }, 'jobId: expected a non-empty string'],
  ])('round notices - %j is refused, naming the subject and the field', (body, reason) => {
    expect(() => decodeRoundNotice(SUBJECT, bytes(body))).toThrow(MalformedMessageError);
    expect(() => decodeRoundNotice(SUBJECT, bytes(body))).toThrow(`malformed message on ${SUBJECT}: ${reason}`);
  });

  describe('on NATS', () => {
    let servers: TestServers;
    let nc: NatsConnection;

    beforeAll(async () => {
      servers = await startTestServers();
      nc = await connectNats(servers.nats.url, 'round notices test');
    });

    afterAll(async () => {
      await nc.close();
      await servers.stop();
    });

    it("round notices - the job's notices reach the trainer; a bad one is logged and the next still comes", async () => {
      const heard: RoundNotice[] = [];
      const warnings: string[] = [];
      const logger = { log: () => undefined, warn: (m: string) => warnings.push(m), error: () => undefined };
      const stop = watchRoundNotices(nc, 'job-r', (notice) => heard.push(notice), logger);
      await nc.flush();
      nc.publish(SUBJECT, bytes({ jobId: 'job-r', shard: 0, version: 7 }));
      nc.publish(SUBJECT, new TextEncoder().encode('{"jobId":'));
      nc.publish(SUBJECTS.rounds('job-other'), bytes({ jobId: 'job-other', shard: 0, version: 1 }));
      nc.publish(SUBJECT, bytes({ jobId: 'job-r', shard: 1, version: 7 }));
      for (let i = 0; i < 50 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 20));
      expect(heard).toEqual([
        { jobId: 'job-r', shard: 0, version: 7 },
        { jobId: 'job-r', shard: 1, version: 7 },
      ]);
      expect(warnings).toEqual([
        expect.stringMatching(/^job job-r: ignoring a round notice: malformed message on .*not JSON/),
      ]);
      stop();
      await nc.flush();
      nc.publish(SUBJECT, bytes({ jobId: 'job-r', shard: 0, version: 8 }));
      await nc.flush();
      await new Promise((r) => setTimeout(r, 50));
      expect(heard).toHaveLength(2);
    });
  });
});
