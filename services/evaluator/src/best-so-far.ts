/**
 * What the evaluator has learnt of one run: each evaluation goes through the job's stop policy,
 * and the best parameters are kept, in memory and in the job's output (`best-checkpoint.ts`),
 * so an evaluator started again for the same run carries on from there.
 */
import type { JobSpec } from '#libs/job-spec';
import type { PlainTensor } from '#libs/learner';
import {
  BestCheckpointError,
  loadBestCheckpoint,
  removeBestCheckpoint,
  saveBestCheckpoint,
} from './best-checkpoint.js';
import { errorMessage } from './errors.js';
import type { LineLogger } from '#libs/logging';
import { StopPolicy, type StopDecision } from './stop-policy.js';

/** An evaluated parameter set. */
export interface Scored {
  version: number;
  value: number;
  params: PlainTensor[];
}

/**
 * The stop policy of a run and its best parameters. Checkpoint writes go one at a time, in
 * order, and a failed one is logged: the run goes on without it.
 */
export class BestSoFar {
  private readonly policy: StopPolicy;
  private kept: Scored | undefined;
  private restoring: Promise<number> | undefined;
  private saving: Promise<void> = Promise.resolve();

  constructor(
    private readonly run: { jobId: string; startedAt: string; spec: JobSpec },
    private readonly logger: LineLogger,
  ) {
    this.policy = new StopPolicy(run.spec.stop, run.spec.evaluation.metric);
  }

  /** The best parameters seen (or restored), if any were kept. */
  get best(): Scored | undefined {
    return this.kept;
  }

  /** The best value of the followed metric so far, NaN before any. */
  get bestValue(): number {
    return this.policy.best?.value ?? Number.NaN;
  }

  /** What the stop policy has decided so far. */
  get decision(): StopDecision {
    return this.policy.decision;
  }

  /**
   * Takes back, once, what an earlier evaluator process of this run kept in the job's output
   * (best parameters, stop policy counters), and resolves to the model version it had reached
   * (-1 when none). A checkpoint that cannot be read is logged and the run starts afresh.
   */
  restored(): Promise<number> {
    this.restoring ??= this.restore();
    return this.restoring;
  }

  /**
   * Puts an evaluation of `scored.params` through the stop policy, keeps the parameters when
   * they are the new best, and records the outcome in the job's output.
   */
  observe(scored: Scored): StopDecision & { improved: boolean } {
    const decision = this.policy.observe({ version: scored.version, value: scored.value });
    if (decision.improved) this.kept = scored;
    this.save(decision.improved ? scored : undefined);
    return decision;
  }

  /** Resolves once every checkpoint write asked for so far has finished. */
  flushed(): Promise<void> {
    return this.saving;
  }

  /** Removes the checkpoint from the job's output, once the final model is there. */
  async discard(): Promise<void> {
    await this.saving;
    await removeBestCheckpoint(this.run.spec.output).catch((err: unknown) => {
      this.logger.warn(`job ${this.run.jobId}: removing the best checkpoint failed (${errorMessage(err)})`);
    });
  }

  /** Lets go of the best parameters. */
  forget(): void {
    this.kept = undefined;
  }

  private async restore(): Promise<number> {
    const { jobId, startedAt, spec } = this.run;
    try {
      const checkpoint = await loadBestCheckpoint(spec.output, jobId, startedAt);
      if (checkpoint === undefined) return -1;
      this.policy.restore(checkpoint.policy);
      const best = checkpoint.policy.best;
      if (checkpoint.params !== undefined && best !== undefined && checkpoint.version === best.version) {
        this.kept = { version: best.version, value: best.value, params: checkpoint.params };
      }
      this.logger.log(
        `job ${jobId}: resumed from the best checkpoint: ${checkpoint.policy.evaluations} evaluations, ` +
          (best === undefined
            ? 'no best yet'
            : `best ${spec.evaluation.metric} ${best.value} at version ${best.version}`),
      );
      return checkpoint.version;
    } catch (err) {
      if (!(err instanceof BestCheckpointError)) throw err;
      this.logger.warn(`job ${jobId}: ${err.message}; starting the evaluation afresh`);
      return -1;
    }
  }

  /** Records the policy counters, and new best parameters, in the job's output. */
  private save(improved: Scored | undefined): void {
    const checkpoint = {
      jobId: this.run.jobId,
      startedAt: this.run.startedAt,
      metric: this.run.spec.evaluation.metric,
      policy: this.policy.state(),
      version: improved?.version ?? this.kept?.version ?? -1,
      ...(improved === undefined ? {} : { params: improved.params }),
    };
    this.saving = this.saving
      .then(() => saveBestCheckpoint(this.run.spec.output, checkpoint))
      .catch((err: unknown) => {
        this.logger.warn(`job ${this.run.jobId}: saving the best checkpoint failed (${errorMessage(err)})`);
      });
  }
}
