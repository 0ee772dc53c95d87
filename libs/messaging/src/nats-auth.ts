import { readFileSync } from 'node:fs';
import {
  credsAuthenticator,
  nkeyAuthenticator,
  nkeys,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
  type TlsOptions,
} from '@nats-io/transport-node';
import { ConfigError, natsUrlCredentials, type NatsClientConfig } from '#libs/config';

const CREDS_JWT_MARKER = /-----BEGIN NATS USER JWT-----/;
const CREDS_SEED_MARKER = /-----BEGIN USER NKEY SEED-----/;

function readSecretFile(variable: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ConfigError(variable, `cannot read "${path}": ${(cause as Error).message}`, { cause });
  }
}

/**
 * The authenticator for the one way of authenticating `config` sets (see
 * {@link NatsClientConfig}), or undefined for an anonymous connection. Key files are read and
 * checked now, so a bad one is named before any connection is tried; no secret is ever quoted.
 * @throws ConfigError naming the variable whose file cannot be used.
 */
export function natsAuthenticator(config: NatsClientConfig): Authenticator | undefined {
  if (config.natsCreds) {
    const text = readSecretFile('NATS_CREDS', config.natsCreds);
    if (!CREDS_JWT_MARKER.test(text) || !CREDS_SEED_MARKER.test(text)) {
      throw new ConfigError('NATS_CREDS', `"${config.natsCreds}" is not a .creds file (a user JWT and an NKey seed)`);
    }
    return credsAuthenticator(new TextEncoder().encode(text));
  }
  if (config.natsNkey) {
    const seed = readSecretFile('NATS_NKEY', config.natsNkey).trim();
    try {
      nkeys.fromSeed(new TextEncoder().encode(seed));
    } catch (cause) {
      throw new ConfigError('NATS_NKEY', `"${config.natsNkey}" does not hold an NKey seed`, { cause });
    }
    return nkeyAuthenticator(new TextEncoder().encode(seed));
  }
  if (config.natsUser !== undefined && config.natsPassword !== undefined) {
    return usernamePasswordAuthenticator(config.natsUser, config.natsPassword);
  }
  if (config.natsToken !== undefined) return tokenAuthenticator(config.natsToken);
  const fromUrl = natsUrlCredentials(config.natsUrl);
  if (fromUrl?.token !== undefined) return tokenAuthenticator(fromUrl.token);
  if (fromUrl?.user !== undefined) return usernamePasswordAuthenticator(fromUrl.user, fromUrl.password);
  return undefined;
}

/** The TLS settings for `config`, or undefined when it sets none (TLS only if the server asks). */
export function natsTlsOptions(config: NatsClientConfig): TlsOptions | undefined {
  if (!config.natsTlsCa && !config.natsTlsCert && !config.natsTlsKey) return undefined;
  return {
    ...(config.natsTlsCa ? { caFile: config.natsTlsCa } : {}),
    ...(config.natsTlsCert ? { certFile: config.natsTlsCert } : {}),
    ...(config.natsTlsKey ? { keyFile: config.natsTlsKey } : {}),
  };
}
