/**
 * The contents of a job's `summary.json`: why it stopped, the exported parameters and their
 * metric, and what the run took (epochs, steps, wall time, samples trained on).
 */
import type { JobSpec } from '#libs/job-spec';
import type { MasterClient } from '#libs/master-client';
import type { JobRecord, JobSummary, StopReason } from '#libs/messaging';
import { errorMessage } from './errors.js';
import type { LineLogger } from '#libs/logging';
import type { StopDecision } from './stop-policy.js';

/** What the evaluator knows of a stopped run when it writes the summary. */
export interface RunOutcome {
  /** The job's latest record (state, reason, epoch, `stoppedAt`). */
  record: JobRecord;
  spec: JobSpec;
  /** The exported parameters' version and metric value (NaN: unscored). */
  chosen: { version: number; value: number };
  /** The highest model version the evaluator heard of. */
  latestVersion: number;
  /** The evaluator's own stop decision, the reason when the record names none. */
  decision: StopDecision;
}

/** Where the sample count comes from. */
export interface SummarySources {
  master: MasterClient;
  /** How long the status request waits for the master. */
  statusTimeoutMs: number;
  logger: LineLogger;
}

/**
 * Builds the summary of `run`. The samples trained on are the master's count; when the master
 * does not answer they are estimated as steps times batch size, with a warning.
 */
export async function summarizeRun(run: RunOutcome, sources: SummarySources): Promise<JobSummary> {
  const { record, spec, chosen } = run;
  const startedAtMs = Date.parse(record.startedAt);
  const endMs = record.stoppedAt !== undefined ? Date.parse(record.stoppedAt) : Date.now();
  const wallSeconds = Math.max(0, (endMs - startedAtMs) / 1000) || 0;
  const steps = Math.max(run.latestVersion, chosen.version, 0);
  let samples: number;
  try {
    samples = (await sources.master.jobStatus(record.jobId, { timeoutMs: sources.statusTimeoutMs })).samples;
    if (typeof samples !== 'number' || !Number.isFinite(samples)) throw new Error('status reply has no samples');
  } catch (err) {
    samples = steps * spec.training.batchSize;
    sources.logger.warn(
      `job ${record.jobId}: samples from the master unavailable (${errorMessage(err)}); estimating ${samples}`,
    );
  }
  const stopReason: StopReason = record.reason ?? (run.decision.stop ? run.decision.reason : 'manual');
  return {
    jobId: record.jobId,
    startedAt: record.startedAt,
    stopReason,
    metric: spec.evaluation.metric,
    bestValue: Number.isFinite(chosen.value) ? chosen.value : null,
    bestVersion: chosen.version,
    epochs: record.epoch,
    steps,
    wallSeconds,
    samples,
    samplesPerSecond: wallSeconds > 0 ? samples / wallSeconds : 0,
  };
}
