/**
 * Why a process is not ready yet, or undefined when the condition it checks holds: for example
 * "NATS is disconnected" or "standing by for the shard's lease".
 */
export type ReadinessCheck = () => string | undefined;

/**
 * The conditions under which a process serves: each named check says why it is not ready, and
 * the process is ready when none does. Components add their checks as they start and remove
 * them as they stop.
 */
export class Readiness {
  private readonly checks = new Map<string, ReadinessCheck>();

  /** Adds (or replaces) the check named `name`. */
  set(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** Removes the check named `name`. */
  delete(name: string): void {
    this.checks.delete(name);
  }

  /** Why the process is not ready, one reason per failing check; empty when ready. */
  reasons(): string[] {
    const reasons: string[] = [];
    for (const [name, check] of this.checks) {
      let reason: string | undefined;
      try {
        reason = check();
      } catch (err) {
        reason = `check failed: ${(err as Error).message}`;
      }
      if (reason !== undefined) reasons.push(`${name}: ${reason}`);
    }
    return reasons;
  }
}
