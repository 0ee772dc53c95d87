/**
 * Scoring a job's parameters: inference with the job's model on its evaluation set, summed
 * over every batch into the mean loss (and the accuracy of a classifier), and the value of the
 * metric the job follows.
 */
import type * as tf from '@tensorflow/tfjs';
import type { JobSpec } from '#libs/job-spec';
import { TfjsLearner, namedTrainableVariables, type PlainTensor } from '#libs/learner';
import type { EvaluationMetrics } from '#libs/messaging';
import type { EvaluationSetCache } from './evaluation-set.js';
import type { ParamManifestEntry } from './snapshot-params.js';

/** How one parameter set did on the evaluation set. */
export interface Score {
  metrics: EvaluationMetrics;
  /** Examples scored. */
  examples: number;
  /** The value of the job's `evaluation.metric` (NaN for accuracy without `numClasses`). */
  value: number;
}

/**
 * The job's model, built once from its spec and reused for every set of parameters: scores
 * them, tells the shards which parameters to send, and holds the parameters to export.
 */
export class Scorer {
  private learner: TfjsLearner | undefined;

  constructor(
    private readonly spec: JobSpec,
    private readonly evaluationSets: EvaluationSetCache,
  ) {}

  /**
   * Runs `params` over the evaluation set.
   * @throws EvaluationSetError when the evaluation files cannot be read.
   */
  async score(params: PlainTensor[]): Promise<Score> {
    const set = await this.evaluationSets.get(this.spec);
    const learner = await this.ensureLearner();
    learner.setParams(params);
    let lossSum = 0;
    let correct = 0;
    let examples = 0;
    for (const batch of set.batches) {
      const result = await learner.evaluate(batch);
      lossSum += result.lossSum;
      correct += result.correct;
      examples += result.samples;
    }
    const metrics: EvaluationMetrics = { loss: lossSum / examples };
    if (this.spec.dataset.layout.numClasses !== undefined) metrics.accuracy = correct / examples;
    const value = this.spec.evaluation.metric === 'accuracy' ? (metrics.accuracy ?? Number.NaN) : metrics.loss;
    return { metrics, examples, value };
  }

  /** The model's parameters (names and shapes, in order), as the shards are asked for them. */
  async manifest(): Promise<ParamManifestEntry[]> {
    const learner = await this.ensureLearner();
    return namedTrainableVariables(learner.model).map(({ name, variable }) => ({ name, shape: [...variable.shape] }));
  }

  /** The model holding `params`, to be saved; valid until the next call or {@link release}. */
  async modelWith(params: PlainTensor[]): Promise<tf.LayersModel> {
    const learner = await this.ensureLearner();
    learner.setParams(params);
    return learner.model;
  }

  /** Frees the model and the job's cached evaluation set. */
  release(): void {
    this.learner?.shutdown();
    this.learner = undefined;
    this.evaluationSets.drop(this.spec.id);
  }

  private async ensureLearner(): Promise<TfjsLearner> {
    if (this.learner === undefined) {
      const learner = new TfjsLearner();
      await learner.initialize({
        model: this.spec.model,
        layout: this.spec.dataset.layout,
        seed: this.spec.training.seed,
      });
      this.learner = learner;
    }
    return this.learner;
  }
}
