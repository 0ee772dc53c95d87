/** `#libs/logging`: the one logger interface that libraries and services take. */
export type { LineLogger } from './line-logger.js';
