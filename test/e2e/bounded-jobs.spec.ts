import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { SUBJECTS, connectNats, encodeJson, type JobEvent, type NatsConnection } from '#libs/messaging';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { TINY_LAYOUT, tinyJobSpec, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

const JOB_TIMEOUT_MS = 90_000;

type Event<T extends JobEvent['type']> = Extract<JobEvent, { type: T }>;

describe('bounded jobs, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let master: MasterClient;
  let data: TinyDataset;

  const trainerLogs = () =>
    ['trainer-0', 'trainer-1']
      .map((id) => readFileSync(join(servers.dir, 'cluster', 'logs', `${id}.log`), 'utf8'))
      .join('\n');

  beforeAll(async () => {
    servers = await startTestServers();
    data = await writeTinyDataset(join(servers.dir, 'data'), { files: 2, chunksPerFile: 3 });
    // The master lets models far too big for any trainer through, so the trainers meet them.
    cluster = testCluster(servers, {
      env: { TRIBUTARY_BACKEND: 'wasm', LOG_LEVEL: 'log', MAX_JOB_PARAMETERS: '1000000000000', MAX_JOB_FAULTS: '2' },
    });
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'e2e-test');
    master = new MasterClient(nc, 'e2e-test');
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  test(
    'bounded jobs - jobs whose model cannot be built or whose data cannot be read fail naming the cause; a job submitted after them runs to its stop, untouched by a refused spec of its id',
    async () => {
      const output = (id: string) => join(servers.dir, `out-${id}`);
      await master.submitJob(
        tinyJobSpec('too-big', data, output('too-big'), { model: { preset: 'mlp', hiddenUnits: [1_000_000_000] } }),
      );
      await master.submitJob(
        tinyJobSpec('unreadable', data, output('unreadable'), {
          // Records hold 8 features; a layout of 9 cannot read a single one.
          dataset: { train: data.train, eval: data.eval, layout: { ...TINY_LAYOUT, featureShape: [9] } },
          training: { batchSize: 16, chunksPerTask: 1, maxTaskFailures: 1, seed: 1 },
        }),
      );
      await master.submitJob(
        tinyJobSpec('after-them', data, output('after-them'), {
          stop: { target: undefined, maxEpochs: 3, maxSeconds: 80 },
        }),
      );
      await waitForEvent(nc, 'after-them', (e) => e.type === 'epoch', JOB_TIMEOUT_MS);
      // A spec with the running job's id is refused; the job must not take that for its end.
      nc.publish(SUBJECTS.submit, encodeJson({ id: 'after-them' }));

      const tooBig = await waitForEvent(nc, 'too-big', (e) => e.type === 'failed', JOB_TIMEOUT_MS);
      const bigFailure = tooBig.at(-1) as Event<'failed'>;
      expect(bigFailure.refused).toBeUndefined();
      expect(bigFailure.error).toMatch(
        /^2 attempts to run it failed; the last \(trainer-.*\): .*Invalid typed array length/,
      );
      expect((await master.jobStatus('too-big')).state).toBe('failed');

      const unreadable = await waitForEvent(nc, 'unreadable', (e) => e.type === 'failed', JOB_TIMEOUT_MS);
      const dataFailure = unreadable.at(-1) as Event<'failed'>;
      expect(dataFailure.error).toMatch(/^epoch 0: all \d+ tasks were discarded; the last error: .*train-/);
      expect(unreadable.some((e) => e.type === 'task-discarded')).toBe(true);
      expect((await master.jobStatus('unreadable')).state).toBe('failed');

      const events = await waitForEvent(
        nc,
        'after-them',
        (e) => e.type === 'model-exported' || (e.type === 'failed' && e.refused !== true),
        JOB_TIMEOUT_MS,
      );
      expect(events.at(-1)?.type).toBe('model-exported');
      expect(events.find((e) => e.type === 'stopped')).toMatchObject({ reason: 'maxEpochs' });
      expect(events.filter((e) => e.type === 'failed')).toEqual([
        expect.objectContaining({
          refused: true,
          field: 'dataset',
          error: expect.stringContaining('invalid job spec'),
        }),
      ]);
      const status = await master.jobStatus('after-them');
      expect(status).toMatchObject({ state: 'stopped', epoch: 3 });
      for (const e of status.epochs) for (const count of Object.values(e.doneCounts)) expect(count).toBe(1);
      expect(trainerLogs()).not.toMatch(/job after-them: failed/);
    },
    JOB_TIMEOUT_MS * 2,
  );
});
