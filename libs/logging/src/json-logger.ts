import { ConsoleLogger, type LogLevel } from '@nestjs/common';

/** Who writes the log lines: the service's role and this process's id. */
export interface LogSource {
  service: string;
  id: string;
}

/** How a service writes its log lines (`LOG_FORMAT`). */
export const LOG_FORMATS = ['text', 'json'] as const;

/** One of {@link LOG_FORMATS}. */
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * Nest's console logger in JSON mode, one object per line, each carrying `time` (ISO 8601),
 * `level`, `service`, `id`, `pid`, `timestamp` (epoch milliseconds), `context` (the component), `message`, and for an error its
 * `stack` or a structured `error` (name, message, stack, cause), so a log collector needs no
 * parsing rules.
 */
export class JsonLogger extends ConsoleLogger {
  constructor(
    private readonly source: LogSource,
    logLevels: LogLevel[],
  ) {
    super({ json: true, colors: false, logLevels });
  }

  protected override getJsonLogObject(
    message: unknown,
    options: Parameters<ConsoleLogger['getJsonLogObject']>[1],
  ): ReturnType<ConsoleLogger['getJsonLogObject']> {
    const { timestamp, level, ...rest } = super.getJsonLogObject(message, options);
    return { time: new Date(timestamp).toISOString(), level, ...this.source, ...rest, timestamp };
  }
}
