import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PserverClient, PserverUnavailableError, type PserverTls } from '#libs/pserver-client';
import { PserverTlsError } from '#libs/pserver-protocol';
import { createCertificateAuthority, type CertificateAuthority, type PemPair } from '#libs/tls-certs';
import { startShard, type RunningShard } from '../test/in-process-shards.js';

const CALL_TIMEOUT_MS = 3_000;

const pem = (pair: PemPair): Pick<PserverTls, 'cert' | 'key'> => ({
  cert: Buffer.from(pair.cert),
  key: Buffer.from(pair.key),
});

describe('pserver grpc over TLS', () => {
  let dir: string;
  let ca: CertificateAuthority;
  let other: CertificateAuthority;
  let shard: RunningShard | undefined;
  const clients: PserverClient[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pserver-tls-'));
    [ca, other] = await Promise.all([
      createCertificateAuthority('tributary test'),
      createCertificateAuthority('other'),
    ]);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await shard?.stop();
    shard = undefined;
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(tls: PserverTls): Promise<string> {
    shard = await startShard({ shard: 0, dataDir: join(dir, 'shard-0'), tls });
    return shard.address;
  }

  function client(address: string, tls?: PserverTls): PserverClient {
    const c = new PserverClient(address, { tls, callTimeoutMs: CALL_TIMEOUT_MS });
    clients.push(c);
    return c;
  }

  async function serverIdentity(names: { dnsNames?: string[]; ipAddresses?: string[] }) {
    return pem(await ca.issue({ commonName: 'pserver', ...names }));
  }

  it('pserver tls - mutual TLS serves a client whose certificate the CA signed', async () => {
    const address = await serve({
      ...(await serverIdentity({ ipAddresses: ['127.0.0.1'] })),
      ca: Buffer.from(ca.cert),
    });
    const trainer = pem(await ca.issue({ commonName: 'trainer' }));
    const status = await client(address, { ...trainer, ca: Buffer.from(ca.cert) }).status();
    expect(status).toMatchObject({ shard: 0, jobs: [] });
  });

  it('pserver tls - mutual TLS refuses a client without a certificate', async () => {
    const address = await serve({
      ...(await serverIdentity({ ipAddresses: ['127.0.0.1'] })),
      ca: Buffer.from(ca.cert),
    });
    await expect(client(address, { ca: Buffer.from(ca.cert) }).status()).rejects.toBeInstanceOf(
      PserverUnavailableError,
    );
  });

  it('pserver tls - mutual TLS refuses a client whose certificate another CA signed', async () => {
    const address = await serve({
      ...(await serverIdentity({ ipAddresses: ['127.0.0.1'] })),
      ca: Buffer.from(ca.cert),
    });
    const stranger = pem(await other.issue({ commonName: 'trainer' }));
    await expect(client(address, { ...stranger, ca: Buffer.from(ca.cert) }).status()).rejects.toBeInstanceOf(
      PserverUnavailableError,
    );
  });

  it('pserver tls - a plain-text client cannot talk to a TLS pserver, nor a client to a pserver its CA did not sign', async () => {
    const address = await serve(await serverIdentity({ ipAddresses: ['127.0.0.1'] }));
    await expect(client(address).status()).rejects.toBeInstanceOf(PserverUnavailableError);
    await expect(client(address, { ca: Buffer.from(other.cert) }).status()).rejects.toBeInstanceOf(
      PserverUnavailableError,
    );
    // TLS without a client CA on the server: any client that trusts the server's CA is served.
    expect(await client(address, { ca: Buffer.from(ca.cert) }).status()).toMatchObject({ shard: 0 });
  });

  it('pserver tls - the certificate must name the host dialled, unless the server name says which name to expect', async () => {
    const address = await serve(await serverIdentity({ dnsNames: ['pserver-0.tributary.test'] }));
    await expect(client(address, { ca: Buffer.from(ca.cert) }).status()).rejects.toBeInstanceOf(
      PserverUnavailableError,
    );
    const named = client(address, { ca: Buffer.from(ca.cert), serverName: 'pserver-0.tributary.test' });
    expect(await named.status()).toMatchObject({ shard: 0 });
  });

  it('pserver tls - settings that cannot work are refused before anything is dialled', async () => {
    const { cert } = await serverIdentity({ ipAddresses: ['127.0.0.1'] });
    expect(() => client('127.0.0.1:1', { cert, ca: Buffer.from(ca.cert) })).toThrow(PserverTlsError);
    await expect(
      startShard({ shard: 0, dataDir: join(dir, 'shard-x'), tls: { ca: Buffer.from(ca.cert) } }),
    ).rejects.toThrow(/PSERVER_TLS_CERT, PSERVER_TLS_KEY/);
  });
});
