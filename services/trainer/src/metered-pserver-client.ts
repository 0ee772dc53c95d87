import { performance } from 'node:perf_hooks';
import type { TransferSpec } from '#libs/job-spec';
import {
  ShardedPserverClient,
  type PulledParams,
  type PushOutcome,
  type ShardedPserverClientOptions,
} from '#libs/pserver-client';
import { bytesPerValue, type TrainerMetrics } from './trainer-metrics.js';

/**
 * A `ShardedPserverClient` that records the latency and tensor bytes of each push and pull in
 * the trainer's metrics (bytes counted in the job's transfer types; a pull that came back with
 * a push counts as pulled bytes too).
 */
export class MeteredPserverClient extends ShardedPserverClient {
  private readonly job: string;

  constructor(
    options: ShardedPserverClientOptions,
    private readonly metrics: TrainerMetrics,
    private readonly transfer: TransferSpec,
  ) {
    super(options);
    this.job = options.jobId;
  }

  override async pushGradients(...args: Parameters<ShardedPserverClient['pushGradients']>): Promise<PushOutcome> {
    const start = performance.now();
    const outcome = await super.pushGradients(...args);
    this.pushed(start, args[2]);
    return outcome;
  }

  override async pushPull(
    ...args: Parameters<ShardedPserverClient['pushPull']>
  ): Promise<PushOutcome & { params?: PulledParams }> {
    const start = performance.now();
    const outcome = await super.pushPull(...args);
    this.pushed(start, args[2]);
    if (outcome.params) this.metrics.moved(this.job, 'pull', tensorBytes(outcome.params.tensors, this.transfer.params));
    return outcome;
  }

  override async pullParams(...args: Parameters<ShardedPserverClient['pullParams']>): Promise<PulledParams> {
    const start = performance.now();
    const pulled = await super.pullParams(...args);
    this.metrics.latency(this.job, 'pull', seconds(start));
    this.metrics.moved(this.job, 'pull', tensorBytes(pulled.tensors, this.transfer.params));
    return pulled;
  }

  private pushed(start: number, gradients: readonly { data: ArrayBufferView }[]): void {
    this.metrics.latency(this.job, 'push', seconds(start));
    this.metrics.moved(this.job, 'push', tensorBytes(gradients, this.transfer.dtype));
  }
}

function seconds(start: number): number {
  return (performance.now() - start) / 1_000;
}

function tensorBytes(tensors: readonly { data: ArrayBufferView }[], dtype: TransferSpec['dtype']): number {
  let values = 0;
  for (const t of tensors) values += t.data.byteLength / 4;
  return values * bytesPerValue(dtype);
}
