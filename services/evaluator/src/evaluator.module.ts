import {
  Inject,
  Injectable,
  Logger,
  Module,
  type DynamicModule,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { getPriority, setPriority } from 'node:os';
import { pserverTlsOf, type CommonConfig } from '#libs/config';
import { selectBackend } from '#libs/learner';
import type { Buckets, NatsConnection } from '#libs/messaging';
import type { ServiceMetrics } from '#libs/service-metrics';
import { BUCKETS, NATS_CONNECTION, SERVICE_METRICS } from '#libs/service-runtime';
import type { EvaluatorConfig } from './evaluator-config.js';
import { EvaluatorMetrics } from './evaluator-metrics.js';
import { Evaluator } from './evaluator.js';
import { PserverSnapshotParams } from './pserver-snapshot-params.js';
import type { SnapshotParamsSource } from './snapshot-params.js';

/** Injection token of the evaluator's validated settings. */
export const EVALUATOR_SETTINGS = Symbol('EVALUATOR_SETTINGS');
/** Injection token of the `SnapshotParamsSource` the evaluator pulls parameters from. */
export const SNAPSHOT_PARAMS = Symbol('SNAPSHOT_PARAMS');

/** The evaluator's full settings: common, its own, and its id. */
export type EvaluatorSettings = CommonConfig & EvaluatorConfig & { id: string };

/** Selects the TF.js backend, then runs the {@link Evaluator} for the application's lifetime. */
@Injectable()
class EvaluatorLifecycle implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Evaluator');
  private evaluator: Evaluator | undefined;

  constructor(
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(BUCKETS) private readonly buckets: Buckets,
    @Inject(EVALUATOR_SETTINGS) private readonly settings: EvaluatorSettings,
    @Inject(SNAPSHOT_PARAMS) private readonly params: SnapshotParamsSource,
    @Inject(SERVICE_METRICS) private readonly metrics: ServiceMetrics,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.lowerPriority();
    const backend = await selectBackend(this.settings.backend === 'auto' ? '' : this.settings.backend);
    const on = backend.device ?? `${backend.threads} thread${backend.threads === 1 ? '' : 's'}`;
    this.logger.log(
      `TF.js backend ${backend.name} (${backend.kind}, ${on})` +
        (backend.skipped.length > 0 ? `; passed over: ${backend.skipped.join('; ')}` : ''),
    );
    this.evaluator = new Evaluator(this.nc, this.buckets, this.params, this.logger, {
      id: this.settings.id,
      backend: backend.kind,
      statusTimeoutMs: this.settings.statusTimeoutMs,
      dataRoots: this.settings.dataRoots,
      outputRoots: this.settings.outputRoots,
      metrics: new EvaluatorMetrics(this.metrics),
      metricsUrl: this.metrics.url || undefined,
    });
    await this.evaluator.start();
  }

  /**
   * Runs the evaluator at its configured niceness, so that on a machine it shares with trainers
   * scoring waits for them rather than them for it. On Linux this sets the main thread's
   * niceness, which is where TF.js computes. Not permitted (raising is always allowed, so this
   * is rare) is logged and otherwise ignored.
   */
  private lowerPriority(): void {
    const niceness = this.settings.niceness;
    if (niceness === 0) return;
    try {
      setPriority(niceness);
      this.logger.log(
        `running at niceness ${getPriority()} (EVALUATOR_NICENESS), so trainers on this machine go first`,
      );
    } catch (err) {
      this.logger.warn(`could not set niceness ${niceness}: ${(err as Error).message}`);
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.evaluator?.stop();
  }
}

/** What {@link EvaluatorModule.forRoot} may be given besides the settings. */
export interface EvaluatorModuleOptions {
  /** Parameters from somewhere else than the parameter servers (tests). */
  params?: SnapshotParamsSource;
}

/** Wires the evaluator: snapshot evaluation, stop policy and model export. */
@Module({})
export class EvaluatorModule {
  static forRoot(config: EvaluatorSettings, options: EvaluatorModuleOptions = {}): DynamicModule {
    const params =
      options.params === undefined
        ? {
            provide: SNAPSHOT_PARAMS,
            inject: [BUCKETS],
            useFactory: (buckets: Buckets): SnapshotParamsSource =>
              new PserverSnapshotParams(buckets.pservers, config.id, pserverTlsOf(config)),
          }
        : { provide: SNAPSHOT_PARAMS, useValue: options.params };
    return {
      module: EvaluatorModule,
      providers: [{ provide: EVALUATOR_SETTINGS, useValue: config }, params, EvaluatorLifecycle],
    };
  }
}
