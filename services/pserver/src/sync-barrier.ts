import { defaultKernelBackend, type GradientSum, type KernelBackend } from '#libs/optimizer';

/**
 * The quorum of synchronous SGD for one shard of one job, and the gradient sum of the open
 * version.
 *
 * - A trainer that joins counts in the quorum from the version it is told (`countedFrom`,
 *   normally the one after the open version), so a newcomer never holds up a step that the
 *   others already started.
 * - A trainer that leaves (or lapses) stops counting at once, which can complete the open step.
 * - Gradients for the open version are added whoever sends them: a non-member, or a member not
 *   counted yet, still contributes.
 * - The step is ready when every counted member has contributed, at least one contribution
 *   exists, and at least `min(minContributors, members)` trainers contributed.
 * - The gradients are averaged weighted by examples: `sum(g_i * n_i) / sum(n_i)`, summed in
 *   float64 (by the kernel backend's gradient sums: SIMD128 over the kernel heap, or plain
 *   loops), so the average is rounded to float32 once whichever runs. The sums and the average
 *   arrays are kept from one version to the next; `dispose` gives them back.
 */
export class SyncBarrier {
  /** Member id → first version whose quorum includes it. */
  private readonly members = new Map<string, number>();
  private readonly contributors = new Set<string>();
  private readonly sums = new Map<string, GradientSum>();
  /** The average of each parameter, written by `take`. */
  private readonly averages = new Map<string, Float32Array>();
  private samples = 0;

  constructor(
    /** Contributions a step waits for while at least that many trainers are members. */
    private readonly minContributors = 1,
    /** Where the sums run and live. */
    private readonly kernels: KernelBackend = defaultKernelBackend(),
  ) {}

  /**
   * Adds a member counted from `countedFrom`; a member that joins again keeps its original
   * version. Returns the version the member counts from.
   */
  join(trainerId: string, countedFrom: number): number {
    const existing = this.members.get(trainerId);
    if (existing !== undefined) return existing;
    this.members.set(trainerId, countedFrom);
    return countedFrom;
  }

  /** Removes a member; returns false when it was not one. */
  leave(trainerId: string): boolean {
    return this.members.delete(trainerId);
  }

  /** True when `trainerId` is a member. */
  isMember(trainerId: string): boolean {
    return this.members.has(trainerId);
  }

  /** Member ids, in joining order. */
  memberIds(): string[] {
    return [...this.members.keys()];
  }

  /** Every member with the first version whose quorum includes it, in joining order. */
  entries(): { trainerId: string; countedFrom: number }[] {
    return [...this.members].map(([trainerId, countedFrom]) => ({ trainerId, countedFrom }));
  }

  /** True when `trainerId` already contributed to the open version. */
  hasContributed(trainerId: string): boolean {
    return this.contributors.has(trainerId);
  }

  /** Number of contributions to the open version. */
  get pending(): number {
    return this.contributors.size;
  }

  /**
   * Adds one trainer's gradients, weighted by `samples`. The caller has checked names, sizes and
   * values; every contribution must carry the same parameters.
   */
  add(trainerId: string, samples: number, gradients: ReadonlyMap<string, Float32Array>): void {
    if (this.contributors.has(trainerId)) throw new Error(`trainer ${trainerId} already contributed`);
    for (const [name, g] of gradients) {
      let sum = this.sums.get(name);
      if (!sum) {
        sum = this.kernels.gradientSum(g.length);
        this.sums.set(name, sum);
      }
      sum.add(g, samples);
    }
    this.contributors.add(trainerId);
    this.samples += samples;
  }

  /** True when the open version (`version`) can step; see the class comment. */
  ready(version: number): boolean {
    if (this.contributors.size === 0) return false;
    if (this.contributors.size < Math.min(this.minContributors, this.members.size)) return false;
    for (const [id, countedFrom] of this.members) {
      if (countedFrom <= version && !this.contributors.has(id)) return false;
    }
    return true;
  }

  /**
   * The weighted average of the contributions, which are then cleared for the next version.
   * The average arrays belong to the barrier: they are valid until the next `take` or
   * `dispose`, long enough for the step that applies them.
   */
  take(): { average: Map<string, Float32Array>; samples: number; contributors: string[] } {
    const average = new Map<string, Float32Array>();
    for (const [name, sum] of this.sums) {
      if (sum.contributions === 0) continue;
      let avg = this.averages.get(name);
      if (!avg) {
        avg = this.kernels.allocate(sum.length);
        this.averages.set(name, avg);
      }
      sum.averageInto(avg, this.samples);
      average.set(name, avg);
    }
    const result = { average, samples: this.samples, contributors: [...this.contributors] };
    this.clear();
    return result;
  }

  /** Drops the contributions to the open version. */
  clear(): void {
    for (const sum of this.sums.values()) sum.reset();
    this.contributors.clear();
    this.samples = 0;
  }

  /** Drops the contributions and gives the sums' and averages' memory back. */
  dispose(): void {
    this.clear();
    for (const sum of this.sums.values()) sum.free();
    for (const avg of this.averages.values()) this.kernels.free(avg);
    this.sums.clear();
    this.averages.clear();
  }
}
