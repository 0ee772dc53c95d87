import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer, type ServerProcess } from '#libs/local-cluster';
import { createCertificateAuthority, type CertificateAuthority } from '#libs/tls-certs';
import { redactedUrl } from '#libs/config';
import { connectRedis, type RedisConnection } from './redis-connection.js';

/** How long a connection that should be refused is given before the test calls it hung. */
const REFUSAL_WAIT_MS = 5_000;

describe('redis connection over TLS with an ACL user', () => {
  let dir: string;
  let ca: CertificateAuthority;
  let server: ServerProcess;
  let port: number;
  const open: RedisConnection[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'redis-tls-'));
    ca = await createCertificateAuthority('tributary test');
    const identity = await ca.issue({ commonName: 'redis', ipAddresses: ['127.0.0.1'], dnsNames: ['localhost'] });
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    server = await startRedisServer({
      dir: join(dir, 'redis'),
      tls: {
        cert: file('redis.pem', identity.cert),
        key: file('redis-key.pem', identity.key),
        ca: file('ca.pem', ca.cert),
      },
      users: [{ name: 'tributary', password: 's3cret-pw' }],
    });
    port = server.port;
  });

  afterEach(async () => {
    for (const c of open.splice(0)) await c.close().catch(() => undefined);
  });

  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function connect(url: string, tls?: Parameters<typeof connectRedis>[3]): Promise<RedisConnection> {
    const client = await connectRedis(url, 'redis-tls-test', undefined, tls);
    open.push(client);
    return client;
  }

  /** Resolves with why the connection was refused; rejects when it was not within the wait. */
  async function refusal(url: string, tls?: Parameters<typeof connectRedis>[3]): Promise<string> {
    let timer: NodeJS.Timeout | undefined;
    const connecting = connect(url, tls).then(
      () => 'connected',
      (err: Error) => err.message,
    );
    const waited = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve('no answer'), REFUSAL_WAIT_MS);
    });
    const outcome = await Promise.race([connecting, waited]);
    clearTimeout(timer);
    return outcome;
  }

  it('redis tls - the ACL user connects over rediss:// verifying the server with the CA', async () => {
    const client = await connect(`rediss://tributary:s3cret-pw@127.0.0.1:${port}`, { ca: Buffer.from(ca.cert) });
    await client.set('k', 'v');
    expect(await client.get('k')).toBe('v');
    expect(await client.aclWhoAmI()).toBe('tributary');
  });

  it('redis tls - a wrong password, no user, or a server the CA did not sign are refused', async () => {
    const caPem = { ca: Buffer.from(ca.cert) };
    expect(await refusal(`rediss://tributary:wrong@127.0.0.1:${port}`, caPem)).toMatch(/WRONGPASS/);
    const anonymous = await refusal(`rediss://127.0.0.1:${port}`, caPem);
    expect(anonymous).toMatch(/^NOAUTH/);
    const stranger = await createCertificateAuthority('other');
    expect(await refusal(`rediss://tributary:s3cret-pw@127.0.0.1:${port}`, { ca: Buffer.from(stranger.cert) })).toMatch(
      /self-signed certificate in certificate chain/,
    );
  });

  it('redis tls - TLS files with a redis:// URL are refused, and logs never show the password', async () => {
    await expect(
      connectRedis(`redis://127.0.0.1:${port}`, 'x', undefined, { ca: Buffer.from(ca.cert) }),
    ).rejects.toThrow(/is not a rediss:\/\/ URL/);
    expect(redactedUrl(`rediss://tributary:s3cret-pw@127.0.0.1:${port}`)).toBe(
      `rediss://tributary:***@127.0.0.1:${port}`,
    );
  });
});
