import type { KV } from '@nats-io/kv';
import type { LocalCluster } from '#libs/local-cluster';
import { ChaosWaitError, leaderMasterPid, waitUntil, type JobEventTap, type ShardVersionWatch } from './chaos-watch.js';
import type { JobAccountingWatch } from './job-accounting.js';

/** What a kill may hit: a service of a role, or the NATS server. */
export type ChaosTarget = 'trainer' | 'pserver' | 'master' | 'evaluator' | 'nats';

/** Every kind of target, in the order the chaos test walks them. */
export const CHAOS_TARGETS: readonly ChaosTarget[] = ['trainer', 'pserver', 'master', 'evaluator', 'nats'];

/** How long one recovery (restart, takeover, progress) may take before the kill counts as fatal. */
export const RECOVERY_TIMEOUT_MS = 90_000;

/** One kill and how the job came back from it. */
export interface Recovery {
  /** 1-based number of the kill. */
  kill: number;
  target: ChaosTarget;
  /** The process killed: `trainer-0`, `master-1`, `nats`, ... */
  id: string;
  signal: NodeJS.Signals;
  /** Epoch ms of the kill. */
  killedAt: number;
  /** Epoch ms the target was back: restarted and ready, or (master) a standby leading. */
  backAt: number;
  /** Epoch ms the job made progress again after `backAt`. */
  recoveredAt: number;
  /** Seconds from the kill to the progress. */
  recoverySeconds: number;
  /** What counted as progress. */
  progress: string;
  /** For a master kill: the id of the master that took over. */
  takeover?: string;
}

/** What a {@link ChaosMonkey} needs to kill and to see the job recover. */
export interface ChaosContext {
  cluster: LocalCluster;
  /** The members bucket (masters say there which one leads). */
  members: KV;
  versions: ShardVersionWatch;
  accounting: JobAccountingWatch;
  events: JobEventTap;
  /** Default {@link RECOVERY_TIMEOUT_MS}. */
  recoveryTimeoutMs?: number;
  say?: (line: string) => void;
}

/**
 * Kills one process of a running local cluster at a time, brings it (or its stand-in) back, and
 * measures how long the job took to make progress again:
 * - trainer, pserver: restarted on the same settings; progress is every shard's version passing
 *   the highest version seen when it was back;
 * - master: the leading master is killed; back is when a standby leads (members bucket,
 *   `leader: true`), progress is the master counting tasks again plus the versions moving; the
 *   killed master is restarted once the standby leads and must come up (as the new standby);
 * - evaluator: restarted; progress is the next `metrics` event;
 * - nats: the server is restarted on its port and store; progress is the versions moving and
 *   the master answering status again.
 */
export class ChaosMonkey {
  /** Every kill so far, in order. */
  readonly recoveries: Recovery[] = [];
  private readonly timeoutMs: number;
  private readonly say: (line: string) => void;

  constructor(private readonly ctx: ChaosContext) {
    this.timeoutMs = ctx.recoveryTimeoutMs ?? RECOVERY_TIMEOUT_MS;
    this.say = ctx.say ?? (() => undefined);
  }

  /** Ids of the cluster's services of a role, by index. */
  idsOf(role: Exclude<ChaosTarget, 'nats'>): string[] {
    return this.ctx.cluster
      .list()
      .filter((s) => s.role === role)
      .sort((a, b) => a.index - b.index)
      .map((s) => s.id);
  }

  /**
   * Kills one process of `target` (the `index`-th of its role; for a master always the leader),
   * restarts it and waits for the job to make progress.
   * @throws ChaosWaitError when the job does not recover within the recovery timeout or ends first.
   */
  async strike(target: ChaosTarget, options: { index?: number; signal?: NodeJS.Signals } = {}): Promise<Recovery> {
    const signal = options.signal ?? 'SIGKILL';
    const kill = this.recoveries.length + 1;
    let recovery: Omit<Recovery, 'kill' | 'target' | 'signal' | 'recoverySeconds'>;
    switch (target) {
      case 'master':
        recovery = await this.strikeMaster(signal);
        break;
      case 'nats':
        recovery = await this.strikeNats(signal);
        break;
      default:
        recovery = await this.strikeService(this.idsOf(target)[options.index ?? 0], target, signal);
    }
    const done: Recovery = {
      kill,
      target,
      signal,
      ...recovery,
      recoverySeconds: (recovery.recoveredAt - recovery.killedAt) / 1000,
    };
    this.recoveries.push(done);
    this.say(
      `kill ${kill}: ${done.id} (${signal}) back after ${((done.backAt - done.killedAt) / 1000).toFixed(1)} s, ` +
        `progress (${done.progress}) after ${done.recoverySeconds.toFixed(1)} s`,
    );
    return done;
  }

  private async strikeService(id: string | undefined, target: ChaosTarget, signal: NodeJS.Signals) {
    if (!id) throw new Error(`no ${target} in the cluster to kill`);
    const { cluster, versions, events } = this.ctx;
    const killedAt = Date.now();
    await cluster.kill(id, signal);
    await cluster.startAgain(id);
    const backAt = Date.now();
    if (target === 'evaluator') {
      const seen = await events.waitFor(
        `${id} restarted: a new metrics event`,
        (e) => e.type === 'metrics',
        backAt,
        this.timeoutMs,
        () => events.ended(),
      );
      return { id, killedAt, backAt, recoveredAt: seen.at, progress: 'metrics event' };
    }
    const threshold = versions.max();
    await versions.waitAbove(threshold, this.timeoutMs, () => events.ended());
    return { id, killedAt, backAt, recoveredAt: Date.now(), progress: `every shard past version ${threshold}` };
  }

  private async strikeMaster(signal: NodeJS.Signals) {
    const { cluster, members, versions, accounting, events } = this.ctx;
    const masters = cluster.list().filter((s) => s.role === 'master' && s.pid !== undefined);
    if (masters.length < 2) throw new Error(`a master kill needs a standby; ${masters.length} master(s) running`);
    const pids = masters.map((m) => m.pid!);
    const leaderPid = await waitUntil(
      'a leading master in the members bucket',
      () => leaderMasterPid(members, pids),
      this.timeoutMs,
    );
    const leader = masters.find((m) => m.pid === leaderPid)!;
    const standbys = masters.filter((m) => m !== leader);
    const before = accounting.last?.status;
    const killedAt = Date.now();
    await cluster.kill(leader.id, signal);
    const newPid = await waitUntil(
      `${leader.id} killed: a standby master leading`,
      () =>
        leaderMasterPid(
          members,
          standbys.map((m) => m.pid!),
          killedAt,
        ),
      this.timeoutMs,
      { abort: () => events.ended() },
    );
    const backAt = Date.now();
    const takeover = standbys.find((m) => m.pid === newPid)!.id;
    // Only now, so the lease goes to a standby that was waiting, not to the restarted process.
    const restarted = cluster.startAgain(leader.id);
    restarted.catch(() => undefined);
    const threshold = versions.max();
    await accounting.waitBeyond(before, backAt, this.timeoutMs, () => events.ended());
    await versions.waitAbove(threshold, this.timeoutMs, () => events.ended());
    const recoveredAt = Date.now();
    await restarted.catch((err: Error) => {
      throw new ChaosWaitError(`${leader.id} did not come back as a standby: ${err.message}`);
    });
    return {
      id: leader.id,
      killedAt,
      backAt,
      recoveredAt,
      progress: `${takeover} counting tasks, every shard past version ${threshold}`,
      takeover,
    };
  }

  private async strikeNats(signal: NodeJS.Signals) {
    const { cluster, versions, accounting, events } = this.ctx;
    const killedAt = Date.now();
    await cluster.kill('nats', signal);
    await cluster.startAgain('nats');
    const backAt = Date.now();
    const threshold = versions.max();
    await versions.waitAbove(threshold, this.timeoutMs, () => events.ended());
    await waitUntil(
      'the master answering status after the NATS restart',
      async () => ((await accounting.poll()) ? true : undefined),
      this.timeoutMs,
      { abort: () => events.ended() },
    );
    return {
      id: 'nats',
      killedAt,
      backAt,
      recoveredAt: Date.now(),
      progress: `every shard past version ${threshold}, master answering`,
    };
  }
}
