import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nkeys } from '@nats-io/transport-node';
import { ConfigError, readNatsClientConfig, type NatsClientConfig } from '#libs/config';
import { startNatsServer, type ServerProcess } from '#libs/local-cluster';
import { createCertificateAuthority } from '#libs/tls-certs';
import { connectNats } from './nats-connection.js';

/** Connects with the settings `env` describes, publishes and flushes, and closes. */
async function roundTrip(env: Record<string, string>): Promise<void> {
  const nc = await connectNats(readNatsClientConfig(env), 'auth test');
  nc.publish('auth.test');
  await nc.flush();
  await nc.close();
}

describe('NATS authentication and TLS', () => {
  let dir: string;
  let users: ServerProcess;
  let token: ServerProcess;
  let tls: ServerProcess;
  let seedFile: string;
  const files: Record<string, string> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nats-auth-'));
    const user = nkeys.createUser();
    seedFile = join(dir, 'user.nk');
    writeFileSync(seedFile, `${new TextDecoder().decode(user.getSeed())}\n`);
    const ca = await createCertificateAuthority('test CA');
    // nats.js checks a loopback server's certificate against the name `localhost`.
    const server = await ca.issue({ commonName: 'nats', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    const client = await ca.issue({ commonName: 'client' });
    for (const [name, text] of Object.entries({
      ca: ca.cert,
      serverCert: server.cert,
      serverKey: server.key,
      clientCert: client.cert,
      clientKey: client.key,
    })) {
      files[name] = join(dir, `${name}.pem`);
      writeFileSync(files[name], text);
    }
    [users, token, tls] = await Promise.all([
      startNatsServer({
        dir: join(dir, 'users'),
        config: `authorization { users: [ { user: "alice", password: "p@ss:word" }, { nkey: "${user.getPublicKey()}" } ] }\n`,
      }),
      startNatsServer({ dir: join(dir, 'token'), config: 'authorization { token: "s3cret" }\n' }),
      startNatsServer({
        dir: join(dir, 'tls'),
        config: `tls { cert_file: "${files.serverCert}", key_file: "${files.serverKey}", ca_file: "${files.ca}", verify: true }\n`,
      }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([users?.stop(), token?.stop(), tls?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('NATS auth - user and password, from the variables or from the URL', async () => {
    await roundTrip({ NATS_URL: users.url, NATS_USER: 'alice', NATS_PASSWORD: 'p@ss:word' });
    const inUrl = users.url.replace('nats://', `nats://alice:${encodeURIComponent('p@ss:word')}@`);
    await roundTrip({ NATS_URL: inUrl });
  });

  test('NATS auth - an NKey seed file', async () => {
    await roundTrip({ NATS_URL: users.url, NATS_NKEY: seedFile });
  });

  test('NATS auth - a token, from NATS_TOKEN or as the URL user part', async () => {
    await roundTrip({ NATS_URL: token.url, NATS_TOKEN: 's3cret' });
    await roundTrip({ NATS_URL: token.url.replace('nats://', 'nats://s3cret@') });
  });

  test('NATS auth - TLS with a client certificate the server verifies', async () => {
    await roundTrip({
      NATS_URL: tls.url,
      NATS_TLS_CA: files.ca,
      NATS_TLS_CERT: files.clientCert,
      NATS_TLS_KEY: files.clientKey,
    });
  });

  test('NATS auth - wrong credentials are refused, not retried for ever', async () => {
    await expect(
      connectNats(readNatsClientConfig({ NATS_URL: users.url, NATS_USER: 'alice', NATS_PASSWORD: 'nope' }), 'bad'),
    ).rejects.toThrow(/authorization/i);
  }, 30_000);

  test('NATS auth - a file that holds no seed or no credentials is named, its contents never quoted', async () => {
    const bogus = join(dir, 'bogus');
    writeFileSync(bogus, 'SECRET-LOOKING-TEXT');
    // Checked when the settings are read, and again when connecting with settings made in code.
    expect(() => readNatsClientConfig({ NATS_NKEY: bogus })).toThrow(
      `NATS_NKEY: "${bogus}" does not hold an NKey user seed (SU...)`,
    );
    const tryWith = (config: Partial<NatsClientConfig>) => connectNats({ natsUrl: users.url, ...config }, 'bad file');
    await expect(tryWith({ natsNkey: bogus })).rejects.toThrow(ConfigError);
    await expect(tryWith({ natsNkey: bogus })).rejects.toThrow(`NATS_NKEY: "${bogus}" does not hold an NKey seed`);
    await expect(tryWith({ natsCreds: bogus })).rejects.toThrow(
      `NATS_CREDS: "${bogus}" is not a .creds file (a user JWT and an NKey seed)`,
    );
    await expect(tryWith({ natsCreds: bogus })).rejects.not.toThrow(/SECRET-LOOKING/);
  });
});
