import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { NATS_ROLES, type NatsRole } from '#libs/messaging';
import { createCertificateAuthority } from '#libs/tls-certs';
import { natsConfigString, natsServerSecurityConfig } from './nats-server-config.js';
import type { RedisServerTls } from './server-processes.js';

/** The Redis ACL user every service of a secured local cluster logs in as. */
export const REDIS_CLUSTER_USER = 'tributary';

/** Holders of a certificate in a secured local cluster: the servers and every role. */
type CertificateHolder = NatsRole | 'nats' | 'redis';

/**
 * A secured local cluster's secrets, kept under `<stateDir>/secure` (readable by the owner
 * only) and made once: a CA, a certificate and key per role and per server, and a random
 * password per NATS role and for the Redis user.
 */
export interface ClusterSecurity {
  /** The directory holding everything below. */
  dir: string;
  /** The CA certificate every party verifies the others with. */
  caFile: string;
  /** NATS password of each role. */
  natsPasswords: Record<NatsRole, string>;
  /** Password of the Redis user {@link REDIS_CLUSTER_USER}. */
  redisPassword: string;
  /** A file of `export NAME=value` lines: the CLI's (operator's) NATS settings. */
  operatorEnvFile: string;
}

/** Path of the certificate of `holder`. */
export function certificateFile(security: ClusterSecurity, holder: CertificateHolder): string {
  return join(security.dir, `${holder}.pem`);
}

/** Path of the private key of `holder`. */
export function keyFile(security: ClusterSecurity, holder: CertificateHolder): string {
  return join(security.dir, `${holder}-key.pem`);
}

function writeSecret(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  chmodSync(path, 0o600);
}

function password(): string {
  return randomBytes(24).toString('base64url');
}

interface StoredPasswords {
  nats: Record<NatsRole, string>;
  redis: string;
}

/**
 * The security of the local cluster under `stateDir`: made on the first call (CA, certificates
 * valid for this machine's names and loopback addresses, passwords), read back on later ones,
 * so the next `up` reuses them. The operator's env file is written for `natsUrl`.
 */
export async function prepareClusterSecurity(stateDir: string, natsUrl: string): Promise<ClusterSecurity> {
  const dir = join(stateDir, 'secure');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const passwordsFile = join(dir, 'passwords.json');
  const caFile = join(dir, 'ca.pem');
  let stored: StoredPasswords;
  if (existsSync(passwordsFile) && existsSync(caFile)) {
    stored = JSON.parse(readFileSync(passwordsFile, 'utf8')) as StoredPasswords;
  } else {
    const ca = await createCertificateAuthority('Tributary local cluster CA');
    const holders: CertificateHolder[] = ['nats', 'redis', ...NATS_ROLES];
    for (const holder of holders) {
      const leaf = await ca.issue({
        commonName: holder,
        dnsNames: ['localhost', hostname()],
        ipAddresses: ['127.0.0.1', '::1'],
      });
      writeFileSync(join(dir, `${holder}.pem`), leaf.cert);
      writeSecret(join(dir, `${holder}-key.pem`), leaf.key);
    }
    writeSecret(join(dir, 'ca-key.pem'), ca.key);
    stored = {
      nats: Object.fromEntries(NATS_ROLES.map((role) => [role, password()])) as Record<NatsRole, string>,
      redis: password(),
    };
    writeSecret(passwordsFile, `${JSON.stringify(stored, null, 2)}\n`);
    writeFileSync(caFile, ca.cert);
  }
  const security: ClusterSecurity = {
    dir,
    caFile,
    natsPasswords: stored.nats,
    redisPassword: stored.redis,
    operatorEnvFile: join(dir, 'operator.env'),
  };
  writeEnvFile(security.operatorEnvFile, { NATS_URL: natsUrl, ...natsClientEnv(security, 'operator') });
  return security;
}

/** The NATS settings (`NATS_USER`, `NATS_PASSWORD`, `NATS_TLS_*`) of `role`. */
export function natsClientEnv(security: ClusterSecurity, role: NatsRole): Record<string, string> {
  return {
    NATS_USER: role,
    NATS_PASSWORD: security.natsPasswords[role],
    NATS_TLS_CA: security.caFile,
    NATS_TLS_CERT: certificateFile(security, role),
    NATS_TLS_KEY: keyFile(security, role),
  };
}

/**
 * Everything a service of `role` needs in a secured cluster besides its URLs: its NATS user and
 * certificate, the same certificate for gRPC between trainers, evaluator and pservers
 * (`PSERVER_TLS_*`, mutual TLS), and for Redis over TLS the CA and client certificate.
 */
export function serviceSecurityEnv(security: ClusterSecurity, role: NatsRole): Record<string, string> {
  return {
    ...natsClientEnv(security, role),
    PSERVER_TLS_CERT: certificateFile(security, role),
    PSERVER_TLS_KEY: keyFile(security, role),
    PSERVER_TLS_CA: security.caFile,
    REDIS_TLS_CA: security.caFile,
    REDIS_TLS_CERT: certificateFile(security, role),
    REDIS_TLS_KEY: keyFile(security, role),
  };
}

/** The Redis URL a service of a secured cluster uses: TLS, as the ACL user. */
export function secureRedisUrl(security: ClusterSecurity, port: number): string {
  return `rediss://${REDIS_CLUSTER_USER}:${encodeURIComponent(security.redisPassword)}@127.0.0.1:${port}`;
}

/**
 * The nats-server configuration of a secured cluster (see {@link natsServerSecurityConfig}),
 * with the cluster's certificates and passwords; with `logFile`, the server logs there.
 */
export function natsSecureConfig(security: ClusterSecurity, logFile?: string): string {
  return natsServerSecurityConfig({
    certFile: certificateFile(security, 'nats'),
    keyFile: keyFile(security, 'nats'),
    caFile: security.caFile,
    passwords: Object.fromEntries(
      NATS_ROLES.map((role) => [role, natsConfigString(security.natsPasswords[role])]),
    ) as Record<NatsRole, string>,
    logFile,
  });
}

/**
 * The redis-server ACL of a secured cluster: the default user off, and one user for the services
 * (every command but administration and flushes).
 */
export function redisSecureConfig(security: ClusterSecurity): string {
  return [
    'user default off',
    `user ${REDIS_CLUSTER_USER} on >${security.redisPassword} ~* &* +@all -@admin -flushall -flushdb`,
    '',
  ].join('\n');
}

/** The TLS files of a secured cluster's redis-server. */
export function redisSecureTls(security: ClusterSecurity): RedisServerTls {
  return { cert: certificateFile(security, 'redis'), key: keyFile(security, 'redis'), ca: security.caFile };
}

/** Writes `env` as `export NAME='value'` lines, readable by the owner only (a shell may source it). */
export function writeEnvFile(path: string, env: Record<string, string>): void {
  const lines = Object.entries(env).map(([name, value]) => `export ${name}='${value.replace(/'/g, `'\\''`)}'`);
  writeSecret(path, `${lines.join('\n')}\n`);
}

/** Reads a file written by {@link writeEnvFile}; an absent file is empty. */
export function readEnvFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^export ([A-Z_][A-Z0-9_]*)='(.*)'$/.exec(line.trim());
    if (m) env[m[1]] = m[2].replace(/'\\''/g, "'");
  }
  return env;
}
