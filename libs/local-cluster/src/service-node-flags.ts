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

/**
 * glibc's malloc settings (`GLIBC_TUNABLES`) every service process starts with. A step turns over
 * buffers of hundreds of KiB to MiBs (gRPC messages, tensors on their way in and out of WASM).
 * By default glibc serves large blocks with fresh `mmap`s and hands freed memory at the top of
 * its heap back to the kernel, so each such buffer pays page faults on first touch: writing 4 MiB
 * into a new Buffer took 2.0–2.6 ms here against 0.1 ms into one reused. Serving blocks up to
 * 32 MiB from the heap and keeping up to 256 MiB of freed memory brought that to 0.3–1.2 ms, and
 * a 4 MiB push-pull through a pserver from 409–465 to 585–738 MB/s, for about 10 MiB more
 * resident memory per process. Other C libraries ignore the variable.
 */
export const SERVICE_MALLOC_TUNABLES = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456';

/**
 * `env` with {@link SERVICE_MALLOC_TUNABLES} in its `GLIBC_TUNABLES`; tunables `env` already sets
 * come after ours, so they win.
 */
export function withServiceMalloc(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const own = env['GLIBC_TUNABLES'];
  if (own?.startsWith(SERVICE_MALLOC_TUNABLES)) return env;
  return { ...env, GLIBC_TUNABLES: own ? `${SERVICE_MALLOC_TUNABLES}:${own}` : SERVICE_MALLOC_TUNABLES };
}
