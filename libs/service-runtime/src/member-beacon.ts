import type { KV } from '@nats-io/kv';
import { allowedCpus, formatCpuList } from '#libs/config';
import { encodeJson, type MemberStatus } from '#libs/messaging';

/** How often a process refreshes its member entry (well under the bucket's TTL). */
export const MEMBER_REFRESH_MS = 3_000;

/**
 * Keeps a process's status fresh in the members bucket so `tributary ps` and the master see it;
 * the entry lapses by itself when the process dies. Each periodic refresh says which CPUs the
 * process may run on as it is then (`cpus`), so a process moved with `taskset -p` shows where it
 * went.
 */
export class MemberBeacon {
  private timer?: NodeJS.Timeout;
  private status: MemberStatus;

  constructor(
    private readonly members: KV,
    base: Omit<MemberStatus, 'at' | 'state'> & { state?: string },
    /** Where the CPUs come from: the process's own by default. */
    private readonly cpus: () => number[] | { unknown: string } = allowedCpus,
  ) {
    this.status = { state: 'idle', ...base, at: new Date().toISOString() };
  }

  /** The key of this process in the members bucket. */
  get key(): string {
    return `${this.status.role}.${this.status.id}`;
  }

  /** Merges `patch` into the status and publishes it now. */
  update(patch: Partial<MemberStatus>): void {
    this.status = { ...this.status, ...patch };
    this.publish();
  }

  /** Starts periodic refreshes. */
  start(): void {
    this.refresh();
    this.timer = setInterval(() => this.refresh(), MEMBER_REFRESH_MS);
    this.timer.unref();
  }

  /** Stops refreshing and removes the entry. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.members.delete(this.key).catch(() => undefined);
  }

  /** Publishes the status with the CPUs read again (only here: `update` may come often). */
  private refresh(): void {
    this.status.cpus = this.cpuList();
    this.publish();
  }

  private publish(): void {
    this.status.at = new Date().toISOString();
    this.members.put(this.key, encodeJson(this.status)).catch(() => undefined);
  }

  /** The CPUs as a list, or undefined where they are not known (or not read as a list). */
  private cpuList(): string | undefined {
    try {
      const cpus = this.cpus();
      return Array.isArray(cpus) ? formatCpuList(cpus) : undefined;
    } catch {
      return undefined;
    }
  }
}
