/** `#libs/retry`: waiting between tries. {@link sleep} pauses without outliving an abort. */
export { sleep } from './abortable-sleep.js';

export type { SleepOptions } from './abortable-sleep.js';
