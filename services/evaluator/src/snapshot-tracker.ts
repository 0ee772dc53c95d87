/**
 * Which snapshot versions are complete: a version can be evaluated once every pserver shard
 * has announced it. Plain TypeScript, no I/O.
 */
import {
  MalformedMessageError,
  decodeJsonObject,
  numberField,
  stringField,
  type SnapshotNotice,
} from '#libs/messaging';

/**
 * Parses a snapshot notice received on `subject` for `jobId` with `shards` pserver shards.
 * @throws MalformedMessageError for anything but a JSON notice of this job with an integer
 *   shard in `[0, shards)` and a non-negative integer version.
 */
export function parseSnapshotNotice(subject: string, data: Uint8Array, jobId: string, shards: number): SnapshotNotice {
  const obj = decodeJsonObject(subject, data);
  const noticeJob = stringField(subject, obj, 'jobId');
  if (noticeJob !== jobId) throw new MalformedMessageError(subject, `jobId: expected ${jobId}, got ${noticeJob}`);
  const shard = numberField(subject, obj, 'shard');
  if (!Number.isInteger(shard) || shard < 0 || shard >= shards) {
    throw new MalformedMessageError(subject, `shard: expected an integer in [0, ${shards}), got ${shard}`);
  }
  const version = numberField(subject, obj, 'version');
  if (!Number.isSafeInteger(version) || version < 0) {
    throw new MalformedMessageError(subject, `version: expected a non-negative integer, got ${version}`);
  }
  const at = typeof obj['at'] === 'string' ? obj['at'] : '';
  return { jobId, shard, version, at };
}

/**
 * Collects snapshot notices of one job and tells the newest version that every shard has
 * announced. Each notice may carry a token (the message to acknowledge); {@link take} hands back
 * the tokens of the versions it settles, so they are acknowledged only once dealt with.
 */
export class SnapshotTracker<Token = unknown> {
  private readonly shardsByVersion = new Map<number, Set<number>>();
  private readonly tokensByVersion = new Map<number, Token[]>();
  private settledUpTo = -1;
  private highest = -1;

  constructor(readonly shards: number) {
    if (!Number.isInteger(shards) || shards < 1) throw new RangeError(`shards ${shards} must be a positive integer`);
  }

  /** The highest version announced by any shard, or -1. */
  get latestVersion(): number {
    return this.highest;
  }

  /** Versions up to this one are settled (evaluated or skipped); -1 at first. */
  get settledVersion(): number {
    return this.settledUpTo;
  }

  /**
   * Records that `shard` announced `version`. A notice for a version already settled is
   * returned as stale (its token is for the caller to acknowledge at once).
   */
  add(shard: number, version: number, token?: Token): 'recorded' | 'stale' {
    this.highest = Math.max(this.highest, version);
    if (version <= this.settledUpTo) return 'stale';
    let shards = this.shardsByVersion.get(version);
    if (shards === undefined) {
      shards = new Set();
      this.shardsByVersion.set(version, shards);
      this.tokensByVersion.set(version, []);
    }
    shards.add(shard);
    if (token !== undefined) this.tokensByVersion.get(version)!.push(token);
    return 'recorded';
  }

  /** The newest version every shard has announced and that is not settled, if any. */
  newestComplete(): number | undefined {
    let newest: number | undefined;
    for (const [version, shards] of this.shardsByVersion) {
      if (shards.size === this.shards && (newest === undefined || version > newest)) newest = version;
    }
    return newest;
  }

  /**
   * Settles every version up to and including `version` (older incomplete ones are skipped
   * for good) and returns the tokens of their notices.
   */
  take(version: number): Token[] {
    const tokens: Token[] = [];
    for (const v of [...this.shardsByVersion.keys()]) {
      if (v > version) continue;
      tokens.push(...this.tokensByVersion.get(v)!);
      this.shardsByVersion.delete(v);
      this.tokensByVersion.delete(v);
    }
    this.settledUpTo = Math.max(this.settledUpTo, version);
    return tokens;
  }

  /** Versions announced but not settled, oldest first (for logs and tests). */
  pendingVersions(): number[] {
    return [...this.shardsByVersion.keys()].sort((a, b) => a - b);
  }
}
