import type { RecordedMember } from './progress-record.js';
import type { SyncBarrier } from './sync-barrier.js';

/**
 * Who is in a job's synchronous quorum on one shard, and whether each member is still alive.
 * Every call of a trainer is a sign of life; a member silent for longer than the member TTL is
 * dropped (it lapses), so a trainer that died without leaving holds up steps only that long. A
 * lapsed member that calls again is a member again, counted from the next version. The quorum
 * itself, with the open version's contributions, is the `SyncBarrier`.
 */
export class ShardMembership {
  private readonly lastSeen = new Map<string, number>();
  /** Members dropped for silence; one that calls again is a member again from the next version. */
  private readonly lapsed = new Set<string>();

  constructor(
    private readonly barrier: SyncBarrier,
    /** Clock, in milliseconds. */
    private readonly now: () => number,
  ) {}

  /**
   * Adds `trainerId` counted from `countedFrom`; a member joining again keeps its version.
   * `joined` is false when it was a member already.
   */
  join(trainerId: string, countedFrom: number): { countedFrom: number; joined: boolean } {
    const joined = !this.barrier.isMember(trainerId);
    return { countedFrom: this.barrier.join(trainerId, countedFrom), joined };
  }

  /** Removes `trainerId` at once; returns false when it was not a member. */
  leave(trainerId: string): boolean {
    this.lastSeen.delete(trainerId);
    this.lapsed.delete(trainerId);
    return this.barrier.leave(trainerId);
  }

  /**
   * Notes a sign of life from `trainerId`. Returns true when it had lapsed and is now a member
   * again, counted from `countedFrom`.
   */
  touch(trainerId: string, countedFrom: number): boolean {
    if (!trainerId) return false;
    this.lastSeen.set(trainerId, this.now());
    if (!this.lapsed.delete(trainerId)) return false;
    this.barrier.join(trainerId, countedFrom);
    return true;
  }

  /** Drops the members silent for longer than `ttlMs`, telling `onLapse` of each; returns their ids. */
  sweep(ttlMs: number, onLapse: (trainerId: string) => void): string[] {
    const now = this.now();
    const lapsed = this.barrier.memberIds().filter((id) => now - (this.lastSeen.get(id) ?? 0) > ttlMs);
    for (const id of lapsed) {
      this.barrier.leave(id);
      this.lastSeen.delete(id);
      this.lapsed.add(id);
      onLapse(id);
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
