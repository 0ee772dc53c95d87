import { env, readConfig, type EnvCheck, type EnvSpec } from './env-config.js';
import { ConfigError } from './errors.js';

/** Default NATS server URL for a local cluster. */
export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';

/**
 * Where a process finds NATS, how it proves who it is, and how it secures the link. At most one
 * way to authenticate is set: a `.creds` file, an NKey seed, a user and password, a token, or
 * credentials in the URL (`nats://user:password@host`, `nats://token@host`).
 */
export interface NatsClientConfig {
  /** NATS server URL(s), comma-separated (`NATS_URL`). */
  natsUrl: string;
  /** A `.creds` file: user JWT and NKey seed (`NATS_CREDS`). */
  natsCreds?: string;
  /** A file holding an NKey user seed, `SU...` (`NATS_NKEY`). */
  natsNkey?: string;
  /** User name (`NATS_USER`), with `natsPassword`. */
  natsUser?: string;
  /** Password (`NATS_PASSWORD`), with `natsUser`. */
  natsPassword?: string;
  /** Authentication token (`NATS_TOKEN`). */
  natsToken?: string;
  /** CA certificate (PEM) the server's certificate must chain to (`NATS_TLS_CA`); turns TLS on. */
  natsTlsCa?: string;
  /** Client certificate (PEM) for servers that verify clients (`NATS_TLS_CERT`), with `natsTlsKey`. */
  natsTlsCert?: string;
  /** Private key (PEM) of `natsTlsCert` (`NATS_TLS_KEY`). */
  natsTlsKey?: string;
}

/** The credentials carried by a NATS URL's user part. */
export interface NatsUrlCredentials {
  user?: string;
  password?: string;
  token?: string;
}

/** A user NKey seed as `nk -gen user` writes it: `SU` and 56 base32 characters. */
const NKEY_USER_SEED = /^SU[A-Z2-7]{56}$/;

function nkeySeedProblem(text: string): string | undefined {
  return NKEY_USER_SEED.test(text.trim()) ? undefined : 'does not hold an NKey user seed (SU...)';
}

function credsProblem(text: string): string | undefined {
  const complete = /-----BEGIN NATS USER JWT-----/.test(text) && /-----BEGIN USER NKEY SEED-----/.test(text);
  return complete ? undefined : 'is not a .creds file (a user JWT and an NKey seed)';
}

function pemProblem(kind: string): (text: string) => string | undefined {
  return (text) => (/-----BEGIN [A-Z ]+-----/.test(text) ? undefined : `is not PEM (${kind})`);
}

/** Environment fields of a NATS client: the services and the CLI. */
export const NATS_CLIENT_CONFIG: EnvSpec<NatsClientConfig> = {
  natsUrl: ['NATS_URL', env.url({ default: DEFAULT_NATS_URL, protocols: ['nats', 'tls', 'ws', 'wss'] })],
  natsCreds: ['NATS_CREDS', env.readableFile({ content: credsProblem })],
  natsNkey: ['NATS_NKEY', env.readableFile({ content: nkeySeedProblem })],
  natsUser: ['NATS_USER', env.optionalString()],
  natsPassword: ['NATS_PASSWORD', env.optionalString()],
  natsToken: ['NATS_TOKEN', env.optionalString()],
  natsTlsCa: ['NATS_TLS_CA', env.readableFile({ content: pemProblem('a CA certificate') })],
  natsTlsCert: ['NATS_TLS_CERT', env.readableFile({ content: pemProblem('a certificate') })],
  natsTlsKey: ['NATS_TLS_KEY', env.readableFile({ content: pemProblem('a private key') })],
};

/**
 * The credentials in the user part of a NATS URL list (`nats://user:password@host`, or
 * `nats://token@host`), undefined when there are none. Every URL of a list carries the same.
 * @throws ConfigError when the URLs of a list carry different credentials.
 */
export function natsUrlCredentials(urls: string, variable = 'NATS_URL'): NatsUrlCredentials | undefined {
  const found = new Set<string>();
  let credentials: NatsUrlCredentials | undefined;
  for (const raw of urls.split(',')) {
    let parsed: URL;
    try {
      parsed = new URL(raw.trim());
    } catch {
      continue; // the URL field names a malformed one
    }
    const user = decodeURIComponent(parsed.username);
    const password = decodeURIComponent(parsed.password);
    found.add(`${user}\n${password}`);
    if (!user && !password) continue;
    credentials = password ? { user, password } : { token: user };
  }
  if (found.size > 1) throw new ConfigError(variable, 'its servers carry different credentials');
  return credentials;
}

/** A NATS URL list with the credentials taken out of each URL, as the client dials it. */
export function natsServersOf(urls: string): string[] {
  return urls.split(',').map((raw) => {
    const u = raw.trim();
    const parsed = new URL(u);
    if (!parsed.username && !parsed.password) return u;
    return `${parsed.protocol}//${parsed.host}`;
  });
}

function isSet(source: Record<string, string | undefined>, name: string): boolean {
  const raw = source[name];
  return raw !== undefined && raw.trim() !== '';
}

/**
 * The rules between NATS settings: one way to authenticate at most, a user with its password,
 * a client certificate with its key, and the same credentials on every URL of `NATS_URL`.
 */
export const natsClientRules: EnvCheck = (source) => {
  const errors: ConfigError[] = [];
  const ways: string[] = [];
  if (isSet(source, 'NATS_CREDS')) ways.push('NATS_CREDS');
  if (isSet(source, 'NATS_NKEY')) ways.push('NATS_NKEY');
  if (isSet(source, 'NATS_USER') || isSet(source, 'NATS_PASSWORD')) ways.push('NATS_USER');
  if (isSet(source, 'NATS_TOKEN')) ways.push('NATS_TOKEN');
  try {
    if (isSet(source, 'NATS_URL') && natsUrlCredentials(source['NATS_URL']!)) ways.push('NATS_URL');
  } catch (err) {
    errors.push(err as ConfigError);
  }
  if (ways.length > 1) {
    const named = ways.map((w) => (w === 'NATS_URL' ? 'credentials in NATS_URL' : w)).join(', ');
    errors.push(new ConfigError(ways[1], `set only one way to authenticate to NATS; found ${named}`));
  }
  const pairs: [string, string][] = [
    ['NATS_USER', 'NATS_PASSWORD'],
    ['NATS_TLS_CERT', 'NATS_TLS_KEY'],
  ];
  for (const [a, b] of pairs) {
    if (isSet(source, a) && !isSet(source, b)) errors.push(new ConfigError(b, `is required when ${a} is set`));
    if (isSet(source, b) && !isSet(source, a)) errors.push(new ConfigError(a, `is required when ${b} is set`));
  }
  return errors;
};

/**
 * Reads and checks the NATS client settings from `source` (default `process.env`), for a
 * process that is not a service (the CLI).
 * @throws ConfigErrors naming every bad variable.
 */
export function readNatsClientConfig(source: Record<string, string | undefined> = process.env): NatsClientConfig {
  return readConfig(NATS_CLIENT_CONFIG, source, [natsClientRules]);
}
