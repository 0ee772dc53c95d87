import { readFileSync } from 'node:fs';
import { env, type EnvSpec } from './env-config.js';

/**
 * The PEM files of one TLS endpoint, read in: its own certificate and key (served, or presented
 * as a client certificate), and the CA that verifies the peer.
 */
export interface TlsMaterial {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
}

/** TLS between trainers, the evaluator and the parameter servers (`PSERVER_TLS_*`). */
export interface PserverTlsConfig {
  /** This process's certificate, PEM (`PSERVER_TLS_CERT`): served by a pserver, presented by a client. */
  pserverTlsCert?: string;
  /** Its private key, PEM (`PSERVER_TLS_KEY`). */
  pserverTlsKey?: string;
  /** CA that verifies the peer (`PSERVER_TLS_CA`); on a pserver it makes client certificates required. */
  pserverTlsCa?: string;
  /** Name a client expects in the pserver's certificate instead of the advertised host (`PSERVER_TLS_SERVER_NAME`). */
  pserverTlsServerName?: string;
}

/** Environment fields of gRPC TLS, read by the pserver, the trainer and the evaluator. */
export const PSERVER_TLS_CONFIG: EnvSpec<PserverTlsConfig> = {
  pserverTlsCert: ['PSERVER_TLS_CERT', env.file({ pairedWith: 'PSERVER_TLS_KEY' })],
  pserverTlsKey: ['PSERVER_TLS_KEY', env.file({ pairedWith: 'PSERVER_TLS_CERT' })],
  pserverTlsCa: ['PSERVER_TLS_CA', env.file()],
  pserverTlsServerName: ['PSERVER_TLS_SERVER_NAME', env.optionalString()],
};

/**
 * The pserver's reading of `PSERVER_TLS_*`: a CA (mutual TLS) needs its own certificate and key,
 * as it serves TLS with them.
 */
export const PSERVER_SERVER_TLS_CONFIG: EnvSpec<PserverTlsConfig> = {
  ...PSERVER_TLS_CONFIG,
  pserverTlsCa: ['PSERVER_TLS_CA', env.file({ pairedWith: 'PSERVER_TLS_CERT' })],
};

/** TLS to Redis (`REDIS_TLS_*`), used with a `rediss://` URL. */
export interface RedisTlsConfig {
  /** CA that verifies the Redis server (`REDIS_TLS_CA`); default the system's. */
  redisTlsCa?: string;
  /** Client certificate, PEM, for a server that asks for one (`REDIS_TLS_CERT`). */
  redisTlsCert?: string;
  /** Its private key, PEM (`REDIS_TLS_KEY`). */
  redisTlsKey?: string;
}

/** Environment fields of Redis TLS, read by every service. */
export const REDIS_TLS_CONFIG: EnvSpec<RedisTlsConfig> = {
  redisTlsCa: ['REDIS_TLS_CA', env.file()],
  redisTlsCert: ['REDIS_TLS_CERT', env.file({ pairedWith: 'REDIS_TLS_KEY' })],
  redisTlsKey: ['REDIS_TLS_KEY', env.file({ pairedWith: 'REDIS_TLS_CERT' })],
};

/** Reads the files a TLS configuration names; undefined when it names none. */
export function readTlsMaterial(files: { cert?: string; key?: string; ca?: string }): TlsMaterial | undefined {
  const read = (path?: string) => (path === undefined ? undefined : readFileSync(path));
  const material = { cert: read(files.cert), key: read(files.key), ca: read(files.ca) };
  return material.cert || material.ca ? material : undefined;
}

/** The pserver TLS material of a configuration, with its server name override; undefined without TLS. */
export function pserverTlsOf(config: PserverTlsConfig): (TlsMaterial & { serverName?: string }) | undefined {
  const material = readTlsMaterial({ cert: config.pserverTlsCert, key: config.pserverTlsKey, ca: config.pserverTlsCa });
  if (material === undefined) return undefined;
  return config.pserverTlsServerName ? { ...material, serverName: config.pserverTlsServerName } : material;
}

/** The Redis TLS material of a configuration; undefined when it names no file. */
export function redisTlsOf(config: RedisTlsConfig): TlsMaterial | undefined {
  return readTlsMaterial({ cert: config.redisTlsCert, key: config.redisTlsKey, ca: config.redisTlsCa });
}
