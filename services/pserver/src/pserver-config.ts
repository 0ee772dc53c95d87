import { PSERVER_SERVER_TLS_CONFIG, env, type CommonConfig, type EnvSpec, type PserverTlsConfig } from '#libs/config';
import { KERNEL_CHOICES, KERNELS_ENV_VAR, type KernelChoice } from '#libs/wasm-simd';
import { QUORUM_CUT_GRACE_MS, QUORUM_MEMBER_LAPSE_MS } from './parameter-shard.js';
import { SHARD_LEASE_TTL_MS } from './shard-lease.js';

/** Host the gRPC server binds to when `PSERVER_HOST` is unset. */
export const DEFAULT_PSERVER_HOST = '127.0.0.1';

/** The parameter server's own settings. */
export interface PserverConfig extends PserverTlsConfig {
  /** Which shard this process serves (`PSERVER_SHARD`, required). */
  shard: number;
  /** Interface to bind (`PSERVER_HOST`). */
  host: string;
  /** Port to bind (`PSERVER_PORT`); 0 picks a free one. */
  port: number;
  /** Host name other machines reach this one by (`PSERVER_ADVERTISE_HOST`); default the bound host. */
  advertiseHost?: string;
  /** Checkpoint directory (`PSERVER_DATA_DIR`); default `.tributary/pserver-<shard>`. */
  dataDir?: string;
  /** Silence after which a trainer leaves the quorum (`PSERVER_MEMBER_TTL_MS`). */
  memberTtlMs: number;
  /**
   * Silence after its step stream was cut (cancelled, or its connection lost) after which a
   * trainer leaves the quorum (`PSERVER_MEMBER_CUT_GRACE_MS`); at most the member TTL.
   */
  cutGraceMs: number;
  /** TTL of the shard's ownership lease in Redis (`PSERVER_LEASE_TTL_MS`). */
  leaseTtlMs: number;
  /** Redis key prefix of the lease (`PSERVER_KEY_PREFIX`), so several clusters can share one Redis. */
  keyPrefix: string;
  /**
   * Which optimizer kernels run (`TRIBUTARY_KERNELS`): WebAssembly SIMD128 where it loads
   * (`auto`, the default), always (`wasm-simd`, failing when it cannot), or plain JavaScript (`js`).
   */
  kernels: KernelChoice;
}

/** Environment fields of the parameter server. */
export const PSERVER_CONFIG: EnvSpec<PserverConfig> = {
  shard: ['PSERVER_SHARD', env.int({ min: 0, max: 4095 })],
  host: ['PSERVER_HOST', env.string({ default: DEFAULT_PSERVER_HOST })],
  port: ['PSERVER_PORT', env.int({ default: 0, min: 0, max: 65_535 })],
  advertiseHost: ['PSERVER_ADVERTISE_HOST', env.optionalString()],
  dataDir: ['PSERVER_DATA_DIR', env.optionalString()],
  memberTtlMs: ['PSERVER_MEMBER_TTL_MS', env.int({ default: QUORUM_MEMBER_LAPSE_MS, min: 100, max: 3_600_000 })],
  cutGraceMs: ['PSERVER_MEMBER_CUT_GRACE_MS', env.int({ default: QUORUM_CUT_GRACE_MS, min: 100, max: 3_600_000 })],
  leaseTtlMs: ['PSERVER_LEASE_TTL_MS', env.int({ default: SHARD_LEASE_TTL_MS, min: 500, max: 600_000 })],
  keyPrefix: ['PSERVER_KEY_PREFIX', env.string({ default: 'tributary', pattern: /^[A-Za-z0-9_:-]+$/ })],
  kernels: [KERNELS_ENV_VAR, env.oneOf(KERNEL_CHOICES, { default: 'auto' })],
  ...PSERVER_SERVER_TLS_CONFIG,
};

/** The parameter server's full settings: common, its own, and its id. */
export type PserverSettings = CommonConfig & PserverConfig & { id: string };

/** The checkpoint directory of a shard when `PSERVER_DATA_DIR` is unset. */
export function defaultDataDir(shard: number): string {
  return `.tributary/pserver-${shard}`;
}

/** The Redis key of a shard's ownership lease. */
export function shardLeaseKey(keyPrefix: string, shard: number): string {
  return `${keyPrefix}:pserver:shard-${shard}:owner`;
}
