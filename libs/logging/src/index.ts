/** `#libs/logging`: the one logger interface that libraries and services take, and JSON log lines. */
export { JsonLogger, LOG_FORMATS } from './json-logger.js';
export type { LineLogger } from './line-logger.js';
export type { LogFormat, LogSource } from './json-logger.js';
