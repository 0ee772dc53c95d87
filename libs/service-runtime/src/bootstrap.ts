import 'reflect-metadata';
import { Logger, type DynamicModule, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  ConfigErrors,
  logLevelsFrom,
  makeServiceId,
  readServiceConfig,
  type CommonConfig,
  type EnvSpec,
} from '#libs/config';
import { JsonLogger } from '#libs/logging';
import { ServiceMetrics, startMetricsServer } from '#libs/service-metrics';
import { ConnectionsModule } from './connections.module.js';

/** How long a service may take to shut down before it is forced to exit. */
export const SERVICE_SHUTDOWN_TIMEOUT_MS = 30_000;

/** What `bootstrapService` needs to know about a service. */
export interface ServiceDefinition<T> {
  role: 'master' | 'pserver' | 'trainer' | 'evaluator';
  /** The service's own environment settings, validated with the common ones. */
  config: EnvSpec<T>;
  /** The root module, given the validated configuration. */
  module: (config: CommonConfig & T & { id: string }) => DynamicModule;
  /** The readiness line, given the running application. */
  readyLine: (app: INestApplicationContext, config: CommonConfig & T & { id: string }) => string;
}

/**
 * Starts a service: validates its environment (a bad value is one clear error and exit code 2),
 * sets up its logging (`LOG_FORMAT`), serves its metrics and health over HTTP (`METRICS_PORT`;
 * `/readyz` fails until the service is up), connects to NATS and Redis, builds the Nest
 * application context, logs one readiness line, and on SIGTERM or SIGINT shuts down cleanly and
 * exits 0.
 */
export async function bootstrapService<T>(def: ServiceDefinition<T>): Promise<INestApplicationContext> {
  let config: CommonConfig & T & { id: string };
  try {
    const raw = readServiceConfig(def.config);
    config = { ...raw, id: raw.id ?? makeServiceId(def.role) };
  } catch (err) {
    if (err instanceof ConfigErrors) {
      process.stderr.write(`${def.role}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const levels = logLevelsFrom(config.logLevel);
  const appLogger = config.logFormat === 'json' ? new JsonLogger({ service: def.role, id: config.id }, levels) : levels;
  Logger.overrideLogger(appLogger);
  const logger = new Logger(def.role);
  const metrics = new ServiceMetrics();
  let phase: 'starting' | 'serving' | 'stopping' = 'starting';
  metrics.readiness.set(def.role, () => (phase === 'serving' ? undefined : phase));
  const metricsServer = await startMetricsServer(metrics, {
    host: config.metricsHost,
    port: config.metricsPort,
    advertiseHost: config.metricsAdvertiseHost,
  }).catch((err: Error) => {
    throw new Error(
      `metrics server on ${config.metricsHost}:${config.metricsPort} (METRICS_HOST, METRICS_PORT): ${err.message}`,
      { cause: err },
    );
  });
  logger.log(`metrics and health on ${metricsServer.url.replace(/\/metrics$/, '')} (/metrics, /healthz, /readyz)`);
  const app = await NestFactory.createApplicationContext(
    {
      module: class ServiceRootModule {},
      imports: [ConnectionsModule.forRoot(config, def.role, metrics), def.module(config)],
    },
    { logger: appLogger, abortOnError: false },
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    phase = 'stopping';
    logger.log(`${signal} received; shutting down`);
    const force = setTimeout(() => {
      logger.error(`shutdown took over ${SERVICE_SHUTDOWN_TIMEOUT_MS} ms; exiting`);
      process.exit(1);
    }, SERVICE_SHUTDOWN_TIMEOUT_MS);
    force.unref();
    app
      .close()
      .then(() => {
        logger.log('stopped');
        process.exit(0);
      })
      .catch((err: Error) => {
        logger.error(`shutdown failed: ${err.message}`);
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await app.init();
  phase = 'serving';
  logger.log(def.readyLine(app, config));
  return app;
}

/** Runs `bootstrapService`, turning a start-up failure into one error line and exit code 1. */
export function runService<T>(def: ServiceDefinition<T>): void {
  bootstrapService(def).catch((err: Error) => {
    process.stderr.write(`${def.role}: failed to start: ${err.message}\n`);
    process.exit(1);
  });
}
