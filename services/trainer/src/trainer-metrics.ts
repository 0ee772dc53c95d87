import type { Counter, Histogram } from 'prom-client';
import type { TransferDtype } from '#libs/job-spec';
import {
  FINE_DURATION_BUCKETS_SECONDS,
  type HistogramSeries,
  type ResolvedHistogram,
  type ServiceMetrics,
} from '#libs/service-metrics';
import { STEP_PHASES, type StepPhase } from './step-phases.js';

/** Which parameter server call a latency or byte count is of. */
export type TransferDirection = 'push' | 'pull';

/**
 * A trainer's Prometheus metrics, labelled by job: samples and steps trained, the duration of
 * each step phase, and the latency and tensor bytes of its pushes and pulls.
 */
export class TrainerMetrics {
  private readonly samples: Counter<'job'>;
  private readonly steps: Counter<'job'>;
  private readonly phases: ResolvedHistogram<'job' | 'phase'>;
  /** The step phases' series of the job observed last, in `STEP_PHASES` order. */
  private phaseSeries: { jobId: string; series: HistogramSeries[] } | undefined;
  private readonly seconds: Record<TransferDirection, Histogram<'job'>>;
  private readonly bytes: Record<TransferDirection, Counter<'job'>>;

  constructor(metrics: ServiceMetrics) {
    this.samples = metrics.counter({
      name: 'tributary_trainer_samples_total',
      help: 'Examples trained on.',
      labelNames: ['job'],
    });
    this.steps = metrics.counter({
      name: 'tributary_trainer_steps_total',
      help: 'Training steps (minibatches) taken.',
      labelNames: ['job'],
    });
    // Observed nine times a step, so with its series looked up once per job.
    this.phases = metrics.resolvedHistogram({
      name: 'tributary_trainer_step_phase_seconds',
      help: `Time of one step spent in each phase: ${STEP_PHASES.join(', ')}.`,
      labelNames: ['job', 'phase'],
      buckets: FINE_DURATION_BUCKETS_SECONDS,
    });
    this.seconds = {
      push: metrics.histogram({
        name: 'tributary_trainer_push_seconds',
        help: 'Latency of a push to every shard (with pushPull, including the parameters sent back).',
        labelNames: ['job'],
      }),
      pull: metrics.histogram({
        name: 'tributary_trainer_pull_seconds',
        help: "Latency of a pull from every shard, including the shards' wait for the version.",
        labelNames: ['job'],
      }),
    };
    this.bytes = {
      push: metrics.counter({
        name: 'tributary_trainer_push_bytes_total',
        help: 'Tensor bytes pushed to the parameter servers, in the transfer type.',
        labelNames: ['job'],
      }),
      pull: metrics.counter({
        name: 'tributary_trainer_pull_bytes_total',
        help: 'Tensor bytes pulled from the parameter servers, in the transfer type.',
        labelNames: ['job'],
      }),
    };
  }

  /** One minibatch of `samples` examples was trained on. */
  step(jobId: string, samples: number): void {
    this.samples.inc({ job: jobId }, samples);
    this.steps.inc({ job: jobId });
  }

  /** The phases of one step, in milliseconds. */
  stepPhases(jobId: string, phases: Readonly<Record<StepPhase, number>>): void {
    if (this.phaseSeries?.jobId !== jobId) {
      this.phaseSeries = { jobId, series: STEP_PHASES.map((phase) => this.phases.series({ job: jobId, phase })) };
    }
    const { series } = this.phaseSeries;
    for (let i = 0; i < STEP_PHASES.length; i++) series[i]!.observe(phases[STEP_PHASES[i]!] / 1_000);
  }

  /** One push or pull call took `seconds`. */
  latency(jobId: string, direction: TransferDirection, seconds: number): void {
    this.seconds[direction].observe({ job: jobId }, seconds);
  }

  /** A push or pull carried `bytes` of tensors. */
  moved(jobId: string, direction: TransferDirection, bytes: number): void {
    this.bytes[direction].inc({ job: jobId }, bytes);
  }
}

/** Bytes one value takes on the wire in `dtype`. */
export function bytesPerValue(dtype: TransferDtype): number {
  return dtype === 'float32' ? 4 : 2;
}
