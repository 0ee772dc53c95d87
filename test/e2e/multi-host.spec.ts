import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kvm, type KV } from '@nats-io/kv';
import { NATS_CLUSTER_NAME, startNatsServer, startRedisServer, type ServerProcess } from '#libs/local-cluster';
import { MasterClient } from '#libs/master-client';
import { KV_BUCKETS, STREAMS, connectNats, type JobEvent, type NatsConnection } from '#libs/messaging';
import { jetstreamManager } from '@nats-io/jetstream';
import { JobEventTap, ShardVersionWatch, waitUntil } from '../support/chaos-watch.js';
import { JobAccountingWatch } from '../support/job-accounting.js';
import { waitBudget, waitForEvent } from '../support/job-events.js';
import {
  createNetnsHosts,
  removeStaleNetns,
  requireNetns,
  type NetnsHost,
  type NetnsNetwork,
} from '../support/network-namespaces.js';
import { startService, type RunningService } from '../support/service-process.js';
import { tinyJobSpec, writeTinyDataset, type TinyDataset } from '../support/tiny-dataset.js';

/*
 * Three machines on one: each host is a Linux network namespace on a bridge, with one node of a
 * 3-node NATS cluster (JetStream, 3 replicas) and some services, which reach each other only by
 * their hosts' addresses. Host a: NATS, Redis, master, evaluator; hosts b and c: NATS, one
 * pserver shard, one trainer. The services run as the README's "Running on many machines"
 * says, with the same variables, and are restarted when they exit (as a process supervisor on
 * each machine would). During one job host c is cut off the network and put back, then host b's
 * NATS node is killed: the job must still end on its epoch budget with every task done once per
 * epoch and shard versions that never went back.
 */

const JOB_ID = 'multi-host-job';
const PSERVERS = 2;
/**
 * Epochs the job runs; it stops on `stop.maxEpochs`. Enough that the job still trains after the
 * last fault: the versions it is followed by come from the pservers bucket, whose writes fail for
 * a while after a NATS node dies (10 to 15 s here), while the job goes on at about 100 versions a
 * second. With 6 epochs (768 steps) the job once ended within 25 s of the kill, before the bucket
 * showed the 15 versions after it; with 12 it did too once the trainers read their data faster,
 * about 1,450 versions in the 15 s after the kill. 30 epochs leave about 3,700 versions then.
 */
const EPOCHS = 30;
/** Fixed ports: each host has its own network stack, so they never collide. */
const NATS_PORT = 4222;
const NATS_ROUTE_PORT = 6222;
const REDIS_PORT = 6379;
const PSERVER_PORT = 7000;
/** Versions trained before the first fault, and again after each, so every fault lands mid-job. */
const PROGRESS_VERSIONS = 15;
/** How long host c stays off the network: longer than a NATS ping and the shard lease (10 s). */
const CUT_OFF_MS = 12_000;
const READY_TIMEOUT_MS = 120_000;
const PROGRESS_TIMEOUT_MS = 180_000;
const TEST_TIMEOUT_MS = 600_000;

/** A service on a host, started again whenever it exits until the test stops it. */
class HostService {
  current: RunningService;
  restarts = 0;
  private stopping = false;

  constructor(
    readonly name: string,
    private readonly role: string,
    private readonly env: Record<string, string>,
    private readonly host: NetnsHost,
  ) {
    this.current = this.launch();
  }

  private launch(): RunningService {
    const service = startService(this.role, this.env, this.host.exec);
    void service.exited.then(() => {
      if (this.stopping) return;
      this.restarts += 1;
      this.current = this.launch();
    });
    return service;
  }

  /**
   * Waits for the service's ready line, following it through restarts: a service that exits at
   * start-up (a NATS cluster still electing its leaders) is started again, as a supervisor would.
   */
  async ready(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const attempt = this.current;
      try {
        await attempt.waitFor(/\bready\b/, Math.max(1, deadline - Date.now()));
        return;
      } catch (err) {
        const exited = attempt.child.exitCode !== null || attempt.child.signalCode !== null;
        if (this.stopping || !exited || Date.now() >= deadline) throw err;
        await waitUntil(`${this.name} started again`, () => (this.current !== attempt ? true : undefined), 10_000);
      }
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const { child, exited } = this.current;
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }
}

describe('multi-host, end to end', () => {
  let dir: string;
  let network: NetnsNetwork | undefined;
  const natsNodes: ServerProcess[] = [];
  let redis: ServerProcess | undefined;
  const services: HostService[] = [];
  let nc: NatsConnection | undefined;
  let natsUrl: string;
  let data: TinyDataset;
  let passed = false;
  const lines: string[] = [];
  const say = (line: string) => lines.push(`${new Date().toISOString()} ${line}`);

  beforeAll(async () => {
    requireNetns();
    removeStaleNetns();
    dir = mkdtempSync(join(tmpdir(), 'tributary-multi-host-'));
    network = createNetnsHosts(['a', 'b', 'c']);
    const [a, b, c] = network.hosts;
    say(`hosts: ${network.hosts.map((h) => `${h.ns} ${h.address}`).join(', ')}`);

    // One NATS node per host, routes to the two others: JetStream clustered.
    natsNodes.push(
      ...(await Promise.all(
        network.hosts.map((host) =>
          startNatsServer({
            dir: join(dir, `nats-${host.label}`),
            host: host.address,
            port: NATS_PORT,
            prefix: host.exec,
            cluster: {
              name: NATS_CLUSTER_NAME,
              serverName: `nats-${host.label}`,
              port: NATS_ROUTE_PORT,
              routes: network!.hosts
                .filter((other) => other !== host)
                .map((other) => `nats-route://${other.address}:${NATS_ROUTE_PORT}`),
            },
          }),
        ),
      )),
    );
    natsUrl = natsNodes.map((n) => n.url).join(',');
    redis = await startRedisServer({ dir: join(dir, 'redis'), host: a.address, port: REDIS_PORT, prefix: a.exec });
    data = await writeTinyDataset(join(dir, 'data'), { files: 4, chunksPerFile: 8, recordsPerChunk: 64 });

    const common = (host: NetnsHost): Record<string, string> => ({
      NATS_URL: natsUrl,
      REDIS_URL: redis!.url,
      TRIBUTARY_JS_REPLICAS: '3',
      METRICS_HOST: host.address,
      TRIBUTARY_BACKEND: 'wasm',
      LOG_LEVEL: 'log',
    });
    const pserver = (host: NetnsHost, shard: number): Record<string, string> => ({
      ...common(host),
      PSERVER_SHARD: String(shard),
      PSERVER_HOST: host.address,
      PSERVER_PORT: String(PSERVER_PORT),
      PSERVER_ADVERTISE_HOST: host.address,
      PSERVER_DATA_DIR: join(dir, `pserver-${shard}`),
    });
    services.push(
      new HostService('pserver-0', 'pserver', pserver(b, 0), b),
      new HostService('pserver-1', 'pserver', pserver(c, 1), c),
      new HostService('master-a', 'master', { ...common(a), TRIBUTARY_ID: 'master-a' }, a),
      new HostService('trainer-b', 'trainer', { ...common(b), TRIBUTARY_ID: 'trainer-b' }, b),
      new HostService('trainer-c', 'trainer', { ...common(c), TRIBUTARY_ID: 'trainer-c' }, c),
      new HostService('evaluator-a', 'evaluator', common(a), a),
    );
    await Promise.all(services.map((s) => s.ready(READY_TIMEOUT_MS)));
    nc = await connectNats(natsUrl, 'multi-host-test');
  }, 240_000);

  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await Promise.all(services.map((s) => s.stop().catch(() => undefined)));
    await Promise.all([...natsNodes, ...(redis ? [redis] : [])].map((s) => s.stop().catch(() => undefined)));
    network?.remove();
    if (!passed) {
      for (const s of services) say(`--- ${s.name} (restarts ${s.restarts}):\n${s.current.output().slice(-3000)}`);
      console.log(`multi-host state kept in ${dir}\n${lines.join('\n')}`);
    } else rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  test(
    'multi-host - a job across three namespaced hosts survives one host cut off and back, and a NATS node killed: it ends on its epochs, every task done once per epoch, shard versions only go up',
    async () => {
      const timeLeft = waitBudget(TEST_TIMEOUT_MS);
      const [, b, c] = network!.hosts;
      const jsm = await jetstreamManager(nc!);
      // The services declared every stream with TRIBUTARY_JS_REPLICAS copies. A stream just
      // created on a cluster may still be electing its leader, when its info is an error.
      const tasks = await waitUntil(
        'the tasks stream answers',
        () => jsm.streams.info(STREAMS.tasks.name).catch(() => undefined),
        30_000,
      );
      expect(tasks.config.num_replicas).toBe(3);
      const pserversKv: KV = await new Kvm(nc!).open(KV_BUCKETS.pservers);
      const events = new JobEventTap(nc!, JOB_ID);
      const versions = new ShardVersionWatch(pserversKv, JOB_ID, PSERVERS);
      const accounting = new JobAccountingWatch(nc!, JOB_ID);
      const progress = async (what: string): Promise<void> => {
        const from = Math.max(0, versions.max());
        const reached = await versions.waitAbove(from + PROGRESS_VERSIONS, PROGRESS_TIMEOUT_MS, () => events.ended());
        say(`${what}: shard versions ${JSON.stringify(reached)}`);
      };
      let all: JobEvent[];
      try {
        await new MasterClient(nc!, 'multi-host-test').submitJob(
          tinyJobSpec(JOB_ID, data, join(dir, 'out'), {
            training: {
              mode: 'sync',
              batchSize: 16,
              chunksPerTask: 1,
              maxTaskFailures: 50,
              taskTimeout: { floorMs: 5000, multiplier: 3 },
              seed: 1,
            },
            checkpoint: { everySeconds: 2 },
            evaluation: { everySteps: 40, metric: 'accuracy' },
            stop: { target: undefined, maxEpochs: EPOCHS, maxSeconds: 540 },
          }),
        );
        versions.start();
        accounting.start();
        await progress('warmed up');

        // Host c off the network: its NATS node, pserver and trainer are cut off from the rest.
        network!.setConnected(c, false);
        say(`host ${c.label} cut off`);
        const cutAt = Date.now();
        await waitUntil(
          'the cut lasts its time',
          () => (Date.now() - cutAt >= CUT_OFF_MS ? true : undefined),
          CUT_OFF_MS * 2,
        );
        network!.setConnected(c, true);
        say(`host ${c.label} back`);
        await progress(`after host ${c.label} came back`);

        // Host b's NATS node dies: its clients move to the two others, which keep a quorum.
        natsNodes[1].child.kill('SIGKILL');
        await waitUntil('NATS node b exits', () => (natsNodes[1].child.signalCode !== null ? true : undefined), 10_000);
        say(`NATS node on host ${b.label} killed`);
        await progress(`after NATS node ${b.label} died`);
        // Every fault happened while the job trained.
        expect(events.ended()).toBeUndefined();

        all = await waitForEvent(nc!, JOB_ID, (e) => e.type === 'stopped' || e.type === 'failed', timeLeft());
        accounting.addEpochEvents(all);
      } finally {
        await versions.stop();
        await accounting.stop();
        events.stop();
      }
      say(`restarts: ${services.map((s) => `${s.name} ${s.restarts}`).join(', ')}`);
      expect(all.at(-1)).toMatchObject({ type: 'stopped', reason: 'maxEpochs' });
      expect(versions.samples).toBeGreaterThan(0);
      expect(versions.decreases()).toEqual([]);
      expect(accounting.accounting().length).toBeGreaterThanOrEqual(EPOCHS);
      expect(accounting.problems()).toEqual([]);
      passed = true;
    },
    TEST_TIMEOUT_MS,
  );
});
