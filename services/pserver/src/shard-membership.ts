import type { RecordedMember } from './progress-record.js';
import type { SyncBarrier } from './sync-barrier.js';

/**
 * Who is in a job's synchronous quorum on one shard, and whether each member is still alive.
 * Every call of a trainer is a sign of life; a member silent for longer than the member TTL is
 * dropped (it lapses), so a trainer that died without leaving holds up steps only that long; one
 * whose step stream was cut and that stays silent lapses sooner, after a grace shorter than the
 * TTL (a dead process's connection closes at once; a live trainer calls again within its
 * heartbeat). A lapsed member that calls again is a member again, counted from the next version. The quorum
 * itself, with the open version's contributions, is the `SyncBarrier`.
 */
export class ShardMembership {
  private readonly lastSeen = new Map<string, number>();
  /** Members dropped for silence; one that calls again is a member again from the next version. */
  private readonly lapsed = new Set<string>();
  /** When a member's step stream was cut, for the members that have not called since. */
  private readonly cutAt = new Map<string, number>();

  constructor(
    private readonly barrier: SyncBarrier,
    /** Clock, in milliseconds. */
    private readonly now: () => number,
  ) {}

  /**
   * Adds `trainerId` counted from `countedFrom`; a member joining again keeps its version. Either
   * way it counts from `atLeast` at the earliest (see `SyncBarrier.join`). `joined` is false when
   * it was a member already; `raised`, when it was one counted from an earlier version.
   */
  join(trainerId: string, countedFrom: number, atLeast = 0): { countedFrom: number; joined: boolean; raised: boolean } {
    const before = this.barrier.countedFrom(trainerId);
    const from = this.barrier.join(trainerId, countedFrom, atLeast);
    return { countedFrom: from, joined: before === undefined, raised: before !== undefined && from > before };
  }

  /** Removes `trainerId` at once; returns false when it was not a member. */
  leave(trainerId: string): boolean {
    this.lastSeen.delete(trainerId);
    this.lapsed.delete(trainerId);
    this.cutAt.delete(trainerId);
    return this.barrier.leave(trainerId);
  }

  /**
   * Notes a sign of life from `trainerId`. Returns true when it had lapsed and is now a member
   * again, counted from `countedFrom`.
   */
  touch(trainerId: string, countedFrom: number): boolean {
    if (!trainerId) return false;
    this.lastSeen.set(trainerId, this.now());
    this.cutAt.delete(trainerId);
    if (!this.lapsed.delete(trainerId)) return false;
    this.barrier.join(trainerId, countedFrom);
    return true;
  }

  /**
   * Notes that a member's step stream was cut (cancelled, or its connection lost, as when its
   * process dies): unless it calls again, it lapses `cutGraceMs` after the cut (see
   * {@link sweep}). Returns false when `trainerId` is not a member.
   */
  cut(trainerId: string): boolean {
    if (!this.barrier.isMember(trainerId)) return false;
    this.cutAt.set(trainerId, this.now());
    return true;
  }

  /**
   * Drops the members silent for longer than `ttlMs`, and those silent for longer than
   * `cutGraceMs` since their step stream was cut, telling `onLapse` of each; returns their ids.
   */
  sweep(ttlMs: number, cutGraceMs: number, onLapse: (trainerId: string, cut: boolean) => void): string[] {
    const now = this.now();
    const lapsed: string[] = [];
    for (const id of this.barrier.memberIds()) {
      const cutAt = this.cutAt.get(id);
      const cut = cutAt !== undefined && now - cutAt > cutGraceMs;
      if (!cut && now - (this.lastSeen.get(id) ?? 0) <= ttlMs) continue;
      this.barrier.leave(id);
      this.lastSeen.delete(id);
      this.cutAt.delete(id);
      this.lapsed.add(id);
      lapsed.push(id);
      onLapse(id, cut);
    }
    return lapsed;
  }

  /**
   * Makes the recorded members members again, none counted before `firstCounted`, as if each
   * had just called.
   */
  restore(members: readonly RecordedMember[], firstCounted: number): void {
    const now = this.now();
    for (const m of members) {
      this.barrier.join(m.trainerId, Math.max(m.countedFrom, firstCounted));
      this.lastSeen.set(m.trainerId, now);
    }
  }

  /** Member ids, in joining order. */
  memberIds(): string[] {
    return this.barrier.memberIds();
  }

  /** The members with the first version each counts in, for the progress record. */
  entries(): RecordedMember[] {
    return this.barrier.entries();
  }
}
