import { ChannelCredentials, ServerCredentials, credentials, type ChannelOptions } from '@grpc/grpc-js';

/**
 * TLS of a parameter server connection, PEM contents: this process's certificate and key (the
 * pserver serves with them, a client presents them as its client certificate) and the CA that
 * verifies the peer.
 */
export interface PserverTls {
  cert?: Buffer;
  key?: Buffer;
  ca?: Buffer;
  /** Name a client expects in the pserver's certificate instead of the host it dials. */
  serverName?: string;
}

/** TLS settings of a parameter server or client that cannot work, saying which variables to set. */
export class PserverTlsError extends Error {
  override readonly name = 'PserverTlsError';
}

/**
 * What the pserver serves with: plain text without TLS; TLS with its certificate and key; and
 * mutual TLS when a CA is given too, requiring a client certificate that CA signed.
 */
export function serverCredentials(tls?: PserverTls): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  if (!tls.cert || !tls.key) {
    throw new PserverTlsError(
      'a TLS parameter server needs its certificate and key (PSERVER_TLS_CERT, PSERVER_TLS_KEY)',
    );
  }
  return ServerCredentials.createSsl(
    tls.ca ?? null,
    [{ cert_chain: tls.cert, private_key: tls.key }],
    tls.ca !== undefined,
  );
}

/**
 * What a client dials a pserver with: plain text without TLS, else TLS verifying the server with
 * the CA (the system's when none is given) and presenting the client certificate when there is one.
 */
export function channelCredentials(tls?: PserverTls): ChannelCredentials {
  if (tls === undefined) return credentials.createInsecure();
  if (Boolean(tls.cert) !== Boolean(tls.key)) {
    throw new PserverTlsError('a client certificate needs its key (PSERVER_TLS_CERT, PSERVER_TLS_KEY)');
  }
  return credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
}

/** The channel options TLS adds: the expected server name, when it is not the dialled host. */
export function tlsChannelOptions(tls?: PserverTls): ChannelOptions {
  return tls?.serverName
    ? { 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName }
    : {};
}
