/**
 * Old-generation heap (MiB) a service process starts with. A trainer's heap holds about 40 MiB
 * that lives for the whole job (TensorFlow.js, the model, the clients), and each step turns over
 * megabytes of short-lived tensor buffers. With V8's default starting limit, the space left above
 * the live heap stays smaller than the young generation, so V8 keeps an incremental mark-compact
 * running almost without pause: on one trainer, 5 to 8 of them a second at about 30 ms each. A
 * larger start leaves the room to collect the young generation alone; the heap still grows and
 * shrinks with need.
 */
export const SERVICE_INITIAL_OLD_SPACE_MB = 256;

/** Node.js flags every service process is started with (the CLI's clusters, the tests). */
export const SERVICE_NODE_FLAGS: readonly string[] = [`--initial-old-space-size=${SERVICE_INITIAL_OLD_SPACE_MB}`];
