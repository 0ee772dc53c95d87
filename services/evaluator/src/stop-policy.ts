/**
 * When a job's model is good enough, or stopped getting better: the job spec's metric-based
 * `stop` conditions (`target`, `patience`) applied to the evaluations of its snapshots. The
 * budgets (`maxEpochs`, `maxSeconds`) are not judged here: the master owns the epoch counter and
 * the start time and stops the job on them itself, evaluator or not. Plain TypeScript, no I/O.
 */

/** The metric-based stop conditions of a job spec (`stop`); either, both or neither. */
export interface StopConditions {
  /** Metric value to reach: accuracy >= target, loss <= target. */
  target?: number;
  /** Evaluations in a row without a new best value. */
  patience?: number;
}

/** The metric the policy follows: accuracy grows, loss shrinks. */
export type StopMetric = 'accuracy' | 'loss';

/** Reasons the evaluator may give for stopping a job. */
export type PolicyStopReason = 'target' | 'patience';

/** One evaluation of a snapshot. */
export interface ScoredSnapshot {
  /** The model version (pserver step) that was evaluated. */
  version: number;
  /** Value of the followed metric. */
  value: number;
}

/** What the policy decided. */
export type StopDecision = { stop: false } | { stop: true; reason: PolicyStopReason; detail: string };

/** The best evaluation so far. */
export interface BestEvaluation {
  value: number;
  version: number;
}

/** The counters of a {@link StopPolicy}, to carry it across a restart. */
export interface PolicyState {
  best?: BestEvaluation;
  evaluationsWithoutImprovement: number;
  evaluations: number;
}

const KEEP_GOING: StopDecision = { stop: false };

/** True when `candidate` is strictly better than `incumbent` for `metric` (NaN never is). */
export function isImprovement(metric: StopMetric, candidate: number, incumbent: number | undefined): boolean {
  if (Number.isNaN(candidate)) return false;
  if (incumbent === undefined || Number.isNaN(incumbent)) return true;
  return metric === 'accuracy' ? candidate > incumbent : candidate < incumbent;
}

/** True when `value` meets `target` for `metric`: accuracy >= target, loss <= target. */
export function meetsTarget(metric: StopMetric, value: number, target: number): boolean {
  return metric === 'accuracy' ? value >= target : value <= target;
}

/** Rounds for messages, so a detail line stays short. */
function show(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toPrecision(6);
}

/**
 * The stop policy of one job. Feed it each evaluation with {@link StopPolicy.observe}. It tracks
 * the best value and its version; once it has decided to stop, it keeps returning that decision.
 *
 * Checks, in this order: `target` (the evaluation meets it), then `patience` (that many
 * evaluations in a row did not beat the best).
 */
export class StopPolicy {
  private bestSoFar: BestEvaluation | undefined;
  private sinceImprovement = 0;
  private evaluationCount = 0;
  private decided: StopDecision = KEEP_GOING;

  constructor(
    readonly conditions: StopConditions,
    readonly metric: StopMetric,
  ) {}

  /** The best evaluation so far, or undefined before the first one with a number. */
  get best(): BestEvaluation | undefined {
    return this.bestSoFar;
  }

  /** Evaluations seen so far. */
  get evaluations(): number {
    return this.evaluationCount;
  }

  /** Evaluations in a row, up to the latest, that did not beat the best. */
  get evaluationsWithoutImprovement(): number {
    return this.sinceImprovement;
  }

  /** The decision taken so far (`{stop:false}` until a condition was met). */
  get decision(): StopDecision {
    return this.decided;
  }

  /** The counters, best included, for {@link StopPolicy.restore}. */
  state(): PolicyState {
    return {
      ...(this.bestSoFar === undefined ? {} : { best: { ...this.bestSoFar } }),
      evaluationsWithoutImprovement: this.sinceImprovement,
      evaluations: this.evaluationCount,
    };
  }

  /**
   * Takes the counters of an earlier policy of the same job (an evaluator that was restarted);
   * the decision is not carried over, the next evaluation takes it again.
   */
  restore(state: PolicyState): void {
    this.bestSoFar = state.best === undefined ? undefined : { ...state.best };
    this.sinceImprovement = state.evaluationsWithoutImprovement;
    this.evaluationCount = state.evaluations;
  }

  /**
   * Records an evaluation and decides. Returns whether it became the new best through
   * `improved`, so the caller knows to keep its parameters.
   */
  observe(evaluation: ScoredSnapshot): StopDecision & { improved: boolean } {
    this.evaluationCount += 1;
    const improved = isImprovement(this.metric, evaluation.value, this.bestSoFar?.value);
    if (improved) {
      this.bestSoFar = { value: evaluation.value, version: evaluation.version };
      this.sinceImprovement = 0;
    } else {
      this.sinceImprovement += 1;
    }
    if (this.decided.stop) return { ...this.decided, improved };
    const { target, patience } = this.conditions;
    if (target !== undefined && meetsTarget(this.metric, evaluation.value, target)) {
      const relation = this.metric === 'accuracy' ? '>=' : '<=';
      this.decided = {
        stop: true,
        reason: 'target',
        detail: `${this.metric} ${show(evaluation.value)} ${relation} target ${show(target)} at version ${evaluation.version}`,
      };
    } else if (patience !== undefined && this.sinceImprovement >= patience) {
      const best = this.bestSoFar;
      this.decided = {
        stop: true,
        reason: 'patience',
        detail:
          `${this.sinceImprovement} evaluations without improvement over the best ${this.metric} ` +
          (best === undefined ? '(none)' : `${show(best.value)} at version ${best.version}`),
      };
    }
    return { ...this.decided, improved };
  }
}

/**
 * Replays a sequence of evaluations through a fresh policy and returns the first stop decision
 * with the index of the evaluation that caused it, or `{stop:false}` when none did.
 */
export function replayStopPolicy(
  conditions: StopConditions,
  metric: StopMetric,
  evaluations: readonly ScoredSnapshot[],
): StopDecision & { at?: number; best?: BestEvaluation } {
  const policy = new StopPolicy(conditions, metric);
  for (let i = 0; i < evaluations.length; i++) {
    const decision = policy.observe(evaluations[i]!);
    if (decision.stop)
      return { stop: true, reason: decision.reason, detail: decision.detail, at: i, best: policy.best };
  }
  return { stop: false, best: policy.best };
}
