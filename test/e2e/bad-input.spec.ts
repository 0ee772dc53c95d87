import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Socket } from 'node:net';
import { join } from 'node:path';
import { credentials, Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { jetstream } from '@nats-io/jetstream';
import { NATS_MAX_PAYLOAD_BYTES, type LocalCluster } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import {
  SUBJECTS,
  connectNats,
  decodeJsonObject,
  encodeJson,
  openBuckets,
  type Buckets,
  type JobEvent,
  type JobStatusReply,
  type NatsConnection,
} from '#libs/messaging';
import {
  InvalidGradientError,
  PserverClient,
  PserverError,
  StaleGradientError,
  shardKey,
  type NamedTensor,
  type TensorArray,
} from '#libs/pserver-client';
import {
  DataType,
  MAX_MESSAGE_SIZE_BYTES,
  ParameterServerClient,
  type PushChunk,
  type PushReply,
} from '#libs/pserver-protocol';
import { HEADER_SIZE_BYTES, indexFiles } from '#libs/recordio';
import { waitUntil } from '../support/chaos-watch.js';
import { waitForEvent } from '../support/job-events.js';
import { testCluster } from '../support/test-cluster.js';
import { startTestServers, type TestServers } from '../support/servers.js';
import { tinyJobSpec, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

const JOB_TIMEOUT_MS = 120_000;
const text = new TextEncoder();

type Event<T extends JobEvent['type']> = Extract<JobEvent, { type: T }>;

describe('bad input, end to end', () => {
  let servers: TestServers;
  let cluster: LocalCluster;
  let nc: NatsConnection;
  let buckets: Buckets;
  let master: MasterClient;
  let data: TinyDataset;

  const log = (id: string) => readFileSync(join(servers.dir, 'cluster', 'logs', `${id}.log`), 'utf8');
  const logs = () =>
    ['master-0', 'trainer-0', 'trainer-1', 'pserver-0', 'pserver-1', 'evaluator-0'].map(log).join('\n');

  beforeAll(async () => {
    servers = await startTestServers();
    data = await writeTinyDataset(join(servers.dir, 'data'), { files: 2, chunksPerFile: 6 });
    cluster = testCluster(servers);
    await cluster.start();
    nc = await connectNats(servers.nats.url, 'e2e-test');
    buckets = await openBuckets(nc);
    master = new MasterClient(nc, 'e2e-test');
  }, 120_000);

  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
    await servers?.stop();
  }, 120_000);

  /** Submits a job and waits for it to be started. */
  async function submit(jobId: string, overrides: Record<string, unknown> = {}, dataset = data): Promise<string> {
    const output = join(servers.dir, `out-${jobId}`);
    await master.submitJob(tinyJobSpec(jobId, dataset, output, overrides));
    await waitForEvent(nc, jobId, (e) => e.type === 'started' || e.type === 'failed', JOB_TIMEOUT_MS);
    return output;
  }

  /** Waits for the job's export; checks it exported and that no task was counted twice in an epoch. */
  async function completes(jobId: string): Promise<JobEvent[]> {
    const events = await waitForEvent(
      nc,
      jobId,
      (e) => e.type === 'model-exported' || e.type === 'failed',
      JOB_TIMEOUT_MS,
    );
    expect(events.at(-1)?.type).toBe('model-exported');
    const status = (await master.jobStatus(jobId)) as JobStatusReply;
    expect(status.state).toBe('stopped');
    for (const e of status.epochs) for (const count of Object.values(e.doneCounts)) expect(count).toBe(1);
    return events;
  }

  /** Sends a request with a raw body and decodes the JSON reply. */
  async function ask(subject: string, body: Uint8Array): Promise<Record<string, unknown>> {
    const reply = await nc.request(subject, body, { timeout: 10_000 });
    return decodeJsonObject(subject, reply.data);
  }

  async function waitForLog(pattern: RegExp, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(logs())) {
      if (Date.now() > deadline) throw new Error(`no log line matches ${pattern}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  test(
    'bad input - garbage and wrong JSON on every subject and bucket the services listen on are refused, and the job running meanwhile completes',
    async () => {
      const jobId = 'garbage-job';
      await submit(jobId, { stop: { target: undefined, maxEpochs: 6, maxSeconds: 200 } });
      const garbage = new Uint8Array([0xff, 0xfe, 0x00, 0x7b, 0x22]);
      const wrong = encodeJson({ jobId: 42, taskId: 'x' });
      const js = jetstream(nc);

      // Job specs: not UTF-8, not an object, an object without a valid id.
      for (const body of [garbage, encodeJson([1, 2]), wrong]) nc.publish(SUBJECTS.submit, body);

      // Requests: claims and reports are answered with an error naming the subject; a report
      // that is well formed but names no current dispatch is not counted.
      for (const subject of [SUBJECTS.taskClaim(jobId), SUBJECTS.taskReport(jobId)]) {
        for (const body of [
          garbage,
          wrong,
          encodeJson({ jobId, taskId: -1, epoch: 0, dispatchId: 'x', trainerId: 't' }),
        ]) {
          const reply = await ask(subject, body);
          expect(String(reply['error'])).toContain(`malformed message on ${subject}`);
        }
      }
      const forged = await ask(
        SUBJECTS.taskReport(jobId),
        encodeJson({
          jobId,
          taskId: 0,
          epoch: 0,
          dispatchId: 'forged',
          trainerId: 'rogue',
          outcome: 'done',
          samples: 64,
        }),
      );
      expect(forged).toMatchObject({ counted: false });
      // Status: the body is not read; a bad job id in the subject is refused.
      expect(await ask(SUBJECTS.status(jobId), garbage)).toMatchObject({ jobId });
      expect(String((await ask('tributary.jobs.NOT!AN!ID.status', garbage))['error'])).toContain('invalid job id');

      // Stops for no known job are ignored.
      nc.publish('tributary.jobs.NOT!AN!ID.stop', garbage);
      nc.publish(SUBJECTS.stop('no-such-job'), garbage);

      // Snapshot notices and task messages the evaluator and the trainers cannot use.
      for (const body of [garbage, wrong, encodeJson({ jobId, shard: 99, version: 1 })]) {
        await js.publish(SUBJECTS.snapshots(jobId), body);
        await js.publish(SUBJECTS.tasks(jobId), body);
      }
      await js.publish(
        SUBJECTS.tasks(jobId),
        encodeJson({ jobId, epoch: 0, taskId: 0, dispatchId: 'forged', chunks: [] }),
      );

      // Bucket entries: the jobs directory (another key, and the running job's own), members,
      // and a shard's registration.
      await buckets.jobs.put('garbage-entry', garbage);
      await buckets.jobs.put('wrong-entry', wrong);
      await buckets.members.put('trainer.rogue', garbage);
      await buckets.members.put('pserver.rogue', wrong);
      await buckets.pservers.put(shardKey(7), garbage);
      await buckets.pservers.put(shardKey(0), garbage);
      await buckets.jobs.put(jobId, garbage);

      const events = await completes(jobId);
      const stopped = events.find((e) => e.type === 'stopped') as Event<'stopped'>;
      expect(stopped.reason).toBe('maxEpochs');
      expect(events.some((e) => e.type === 'task-discarded')).toBe(false);

      // The three specs were refused with a `failed` event each (counted once each, should the
      // replay start over).
      const refusals = new Set<string>();
      await waitForEvent(
        nc,
        'invalid',
        (e) => e.type === 'failed' && refusals.add(JSON.stringify(e)).size >= 3,
        30_000,
      );

      // Each refusal was logged by the service that got it.
      await waitForLog(/refusing a request on tributary\.jobs\.garbage-job\.tasks\.claim/);
      await waitForLog(/skipping snapshot notice/);
      await waitForLog(/skipping job record: .*garbage-entry/);
      await waitForLog(/tributary\.tasks\.garbage-job/);
      await waitForLog(/no-such-job/);
      // The shard's registration was repaired by its pserver (it rewrites it every few seconds).
      await waitUntil(
        'the repaired registration of shard 0',
        async () => {
          const entry = await buckets.pservers.get(shardKey(0));
          try {
            return decodeJsonObject('shard-0', entry!.value)['shard'] === 0 || undefined;
          } catch {
            return undefined;
          }
        },
        30_000,
      );
    },
    JOB_TIMEOUT_MS * 2,
  );

  /** Every `failed` event of a job id seen so far. */
  async function collectFailed(jobId: string): Promise<Event<'failed'>[]> {
    const seen: Event<'failed'>[] = [];
    await waitForEvent(
      nc,
      jobId,
      (e) => {
        if (e.type === 'failed') seen.push(e);
        return false;
      },
      3_000,
    ).catch(() => undefined);
    return seen;
  }

  test(
    'bad input - gradients of the wrong shape, dtype or name and oversized messages from a rogue gRPC client are refused, and the job completes',
    async () => {
      const jobId = 'rogue-grpc';
      await submit(jobId, { stop: { target: undefined, maxEpochs: 6, maxSeconds: 200 } });
      const registration = await buckets.pservers.get(shardKey(0));
      const address = String(decodeJsonObject('shard-0', registration!.value)['address']);
      const rogue = new PserverClient(address, { shard: 0 });
      try {
        // The shard learns of the job when its first trainer initialises it, which may come after
        // the submission is answered: until then a pull is refused as for an unknown job.
        const pulled = await waitUntil(
          `shard 0 to know job ${jobId}`,
          () =>
            rogue.pullParams(jobId, { waitMs: 30_000 }).catch((err: unknown) => {
              if (err instanceof PserverError && err.reason === 'unknown-job') return undefined;
              throw err;
            }),
          JOB_TIMEOUT_MS,
        );
        const param = pulled.tensors[0]!;
        const size = param.data.length;
        const cases: [string, NamedTensor<TensorArray>[], RegExp][] = [
          [
            'unknown name',
            [{ name: 'no/such/param', shape: param.shape, data: new Float32Array(size) }],
            /no\/such\/param/,
          ],
          [
            'wrong shape',
            [{ name: param.name, shape: [size + 1], data: new Float32Array(size + 1) }],
            /shape|expected/,
          ],
          ['wrong dtype', [{ name: param.name, shape: param.shape, data: new Int32Array(size) }], /float32/],
        ];
        for (const [what, gradients, message] of cases) {
          // The shard's version moves on while we ask: push at the current one until the
          // gradient itself is judged.
          let refusal: unknown;
          for (let attempt = 0; attempt < 100; attempt++) {
            const { version } = await rogue.pullParams(jobId, { waitMs: 30_000 });
            refusal = await rogue.pushGradients({ jobId, trainerId: 'rogue', version, samples: 1, gradients }).then(
              () => undefined,
              (err: unknown) => err,
            );
            if (!(refusal instanceof StaleGradientError)) break;
          }
          expect([what, refusal]).toEqual([what, expect.any(InvalidGradientError)]);
          expect((refusal as Error).message).toMatch(message);
        }

        // A message larger than the server accepts is refused by gRPC before any code sees it.
        const raw = new ParameterServerClient(address, credentials.createInsecure(), {
          'grpc.max_send_message_length': -1,
        });
        const oversized = await new Promise<ServiceError | null>((resolve) => {
          const call = raw.pushGradients(new Metadata(), (err: ServiceError | null, _reply?: PushReply) =>
            resolve(err),
          );
          const chunk: PushChunk = {
            jobId,
            trainerId: 'rogue',
            version: 0,
            samples: 1,
            pullWaitMs: 0,
            pullDtype: DataType.UNSPECIFIED,
            round: 0,
            last: false,
            tensor: {
              name: param.name,
              dtype: DataType.FLOAT32,
              shape: [MAX_MESSAGE_SIZE_BYTES / 4 + 1024],
              data: Buffer.alloc(MAX_MESSAGE_SIZE_BYTES + 4096),
              offset: 0,
            },
          };
          call.write(chunk);
          call.end();
        });
        raw.close();
        expect(oversized?.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
      } finally {
        rogue.close();
      }
      const events = await completes(jobId);
      expect((events.find((e) => e.type === 'stopped') as Event<'stopped'>).reason).toBe('maxEpochs');
      // The shard went on serving: it was still stepping after the rogue calls.
      expect(events.filter((e) => e.type === 'epoch').length).toBeGreaterThan(0);
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    'bad input - messages over the NATS limit never reach a service, a large garbage spec is refused, and the job completes',
    async () => {
      const jobId = 'oversized';
      await submit(jobId, { stop: { target: undefined, maxEpochs: 4, maxSeconds: 200 } });
      // The client library will not send it.
      expect(() => nc.publish(SUBJECTS.submit, new Uint8Array(NATS_MAX_PAYLOAD_BYTES + 1))).toThrow(/payload/i);
      // A client that sends it anyway is cut off by the server.
      const { port } = new URL(servers.nats.url);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = new Socket();
        let got = '';
        socket.on('data', (b) => {
          got += b.toString();
          if (got.includes('INFO') && !got.includes('sent')) {
            got += 'sent';
            socket.write('CONNECT {"verbose":false,"pedantic":false}\r\n');
            socket.write(`PUB ${SUBJECTS.taskClaim(jobId)} ${NATS_MAX_PAYLOAD_BYTES + 1}\r\n`);
          }
        });
        socket.on('close', () => resolve(got));
        socket.on('error', reject);
        socket.connect(Number(port), '127.0.0.1');
      });
      expect(answer).toMatch(/Maximum Payload/i);
      // Large but within the limit: refused like any garbage.
      const big = text.encode(`{"id": "big-garbage", "pad": "${'x'.repeat(4 * 1024 * 1024)}`);
      nc.publish(SUBJECTS.submit, big);
      const claim = await ask(SUBJECTS.taskClaim(jobId), big);
      expect(String(claim['error'])).toContain('not JSON');

      await completes(jobId);
      const failed = await collectFailed('big-garbage').then((f) => (f.length > 0 ? f : collectFailed('invalid')));
      expect(failed.length).toBeGreaterThan(0);
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    "bad input - specs over the cluster's limits (parameters, batch size) are refused naming the limit, and start nothing",
    async () => {
      const spec = (id: string, overrides: Record<string, unknown>) =>
        tinyJobSpec(id, data, join(servers.dir, `out-${id}`), overrides);
      nc.publish(
        SUBJECTS.submit,
        encodeJson(spec('too-many-params', { model: { preset: 'mlp', hiddenUnits: [1e9, 1e9] } })),
      );
      nc.publish(SUBJECTS.submit, encodeJson(spec('huge-batch', { training: { batchSize: 1_000_000, seed: 1 } })));
      const params = (await waitForEvent(nc, 'too-many-params', (e) => e.type === 'failed', 30_000)).at(
        -1,
      ) as Event<'failed'>;
      expect(params).toMatchObject({ field: 'model', refused: true });
      expect(params.error).toMatch(/parameters, more than MAX_JOB_PARAMETERS \(/);
      const batch = (await waitForEvent(nc, 'huge-batch', (e) => e.type === 'failed', 30_000)).at(
        -1,
      ) as Event<'failed'>;
      expect(batch).toMatchObject({ field: 'training.batchSize', refused: true });
      expect(batch.error).toContain('65536');
      for (const id of ['too-many-params', 'huge-batch']) {
        expect(await buckets.jobs.get(id)).toBeNull();
      }
    },
    JOB_TIMEOUT_MS,
  );

  test(
    'bad input - data and output paths outside TRIBUTARY_DATA_ROOT and TRIBUTARY_OUTPUT_ROOT (absolute, .., a link out) are refused naming the field and the roots, never quoting the file; a following job completes',
    async () => {
      const outside = '/etc/passwd';
      const quoted = readFileSync(outside, 'utf8')
        .split('\n')
        .filter((line) => line.trim() !== '');
      // A link inside the roots to a directory outside them, and a glob whose match is a link out.
      const linkOut = join(servers.dir, 'etc-link');
      symlinkSync('/etc', linkOut);
      const globDir = join(servers.dir, 'glob-link');
      mkdirSync(globDir);
      symlinkSync(outside, join(globDir, 'a.recordio'));
      // Inside the roots, but no RecordIO: refused without quoting what it holds either.
      const secret = `not-recordio-${Date.now()}-secret`;
      const textFile = join(servers.dir, 'plain.txt');
      writeFileSync(textFile, `${secret}\n`.repeat(8));

      const datasetPaths = (train: string[], evalPaths = data.eval) => ({ dataset: { train, eval: evalPaths } });
      const roots = { data: ['TRIBUTARY_DATA_ROOT', tmpdir()], output: ['TRIBUTARY_OUTPUT_ROOT', tmpdir()] };
      const cases: [string, Record<string, unknown>, string, string[]][] = [
        ['path-absolute', datasetPaths([outside]), 'dataset.train[0]', roots.data],
        [
          'path-dotdot',
          datasetPaths([...data.train, join(tmpdir(), '..', outside)]),
          `dataset.train[${data.train.length}]`,
          roots.data,
        ],
        ['path-link', datasetPaths([join(linkOut, 'passwd')]), 'dataset.train[0]', roots.data],
        ['path-glob-link', datasetPaths([join(globDir, '*.recordio')]), 'dataset.train', roots.data],
        ['path-eval', datasetPaths(data.train, [outside]), 'dataset.eval[0]', roots.data],
        ['path-eval-link', datasetPaths(data.train, [join(linkOut, 'passwd')]), 'dataset.eval[0]', roots.data],
        ['path-output', { output: '/etc/tributary-out' }, 'output', roots.output],
        ['path-output-dotdot', { output: join(tmpdir(), '..', 'etc', 'tributary-out') }, 'output', roots.output],
        ['path-output-link', { output: join(linkOut, 'tributary-out') }, 'output', roots.output],
        ['path-not-recordio', datasetPaths([textFile]), 'dataset.train', []],
      ];
      for (const [id, overrides] of cases) {
        nc.publish(SUBJECTS.submit, encodeJson(tinyJobSpec(id, data, join(servers.dir, `out-${id}`), overrides)));
      }
      for (const [id, , field, mentions] of cases) {
        const failed = (await waitForEvent(nc, id, (e) => e.type === 'failed' || e.type === 'started', 30_000)).at(
          -1,
        ) as Event<'failed'>;
        expect([id, failed]).toEqual([id, expect.objectContaining({ type: 'failed', refused: true, field })]);
        for (const m of mentions) expect([id, failed.error]).toEqual([id, expect.stringContaining(m)]);
        for (const leaked of [...quoted, secret])
          expect([id, failed.error]).toEqual([id, expect.not.stringContaining(leaked)]);
        expect(await buckets.jobs.get(id)).toBeNull();
      }
      expect(logs()).not.toContain(secret);

      // The master goes on serving: a good job runs to its end.
      await submit('after-paths', { stop: { target: undefined, maxEpochs: 2, maxSeconds: 200 } });
      await completes('after-paths');
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    'bad input - a corrupt chunk in the middle of a data set: its task fails, is retried, then discarded naming the file and offset; the job goes on and completes',
    async () => {
      const jobId = 'corrupt-chunk';
      const corrupt = await writeTinyDataset(join(servers.dir, 'corrupt'), { files: 2, chunksPerFile: 6 });
      const index = await indexFiles(corrupt.train);
      const victim = index.chunks.find((c) => c.chunkIndexInFile === 2)!;
      // One chunk per task, in index order.
      const victimTask = index.chunks.indexOf(victim);
      const bytes = readFileSync(victim.file);
      bytes[victim.offset + HEADER_SIZE_BYTES + 7] ^= 0x55;
      writeFileSync(victim.file, bytes);

      // Epochs end only once every task is done or discarded, so the budget is reached through the discards.
      await submit(jobId, { stop: { target: undefined, maxEpochs: 2, maxSeconds: 200 } }, corrupt);
      const events = await completes(jobId);
      expect(events.find((e) => e.type === 'stopped')).toMatchObject({ reason: 'maxEpochs' });
      // Other tasks may time out on a busy machine; the corrupt one fails on its own.
      const ofVictim = <T extends 'task-retried' | 'task-discarded'>(type: T) =>
        events.filter((e) => e.type === type && e.taskId === victimTask) as Event<T>[];
      const retried = ofVictim('task-retried');
      const discarded = ofVictim('task-discarded');
      expect(retried.length).toBeGreaterThan(0);
      expect(discarded.length).toBeGreaterThan(0);
      for (const e of [...retried, ...discarded]) {
        expect(e.error).toContain(victim.file);
        expect(e.error).toContain(String(victim.offset));
      }
      expect(discarded.every((e) => e.failures > 1)).toBe(true);
      const epochs = events.filter((e) => e.type === 'epoch') as Event<'epoch'>[];
      expect(epochs.map((e) => [e.done, e.discarded])).toContainEqual([corrupt.trainChunks - 1, 1]);
    },
    JOB_TIMEOUT_MS * 2,
  );

  test(
    "bad input - garbage on a job's stop subject stops it by hand, saying what was wrong, and the model is exported",
    async () => {
      const jobId = 'garbage-stop';
      await submit(jobId, { stop: { target: undefined, maxEpochs: 50, maxSeconds: 200 } });
      const running = await waitForEvent(nc, jobId, (e) => e.type === 'epoch' || e.type === 'stopped', JOB_TIMEOUT_MS);
      expect(running.at(-1)).toMatchObject({ type: 'epoch' });
      nc.publish(SUBJECTS.stop(jobId), new Uint8Array([0xff, 0x00, 0x41]));
      const events = await completes(jobId);
      const stopped = events.find((e) => e.type === 'stopped') as Event<'stopped'>;
      expect(stopped.reason).toBe('manual');
      expect(stopped.detail).toContain('stop body was not JSON');
    },
    JOB_TIMEOUT_MS * 2,
  );
});
