/** Injection token of the master's validated settings (`CommonConfig & MasterConfig & { id }`). */
export const MASTER_SETTINGS = Symbol('MASTER_SETTINGS');
/** Injection token of the master's `JetStreamManager`. */
export const JETSTREAM_MANAGER = Symbol('JETSTREAM_MANAGER');
/** Injection token of the ordered list of `LeaderDuty` providers the master's office runs. */
export const LEADER_DUTIES = Symbol('LEADER_DUTIES');
