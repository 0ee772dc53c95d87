/** Injection token of the master's validated settings (`CommonConfig & MasterConfig & { id }`). */
export const MASTER_SETTINGS = Symbol('MASTER_SETTINGS');
/** Injection token of the master's `JetStreamManager`. */
export const JETSTREAM_MANAGER = Symbol('JETSTREAM_MANAGER');
