import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigErrors,
  PSERVER_SERVER_TLS_CONFIG,
  PSERVER_TLS_CONFIG,
  env,
  natsServersOf,
  natsUrlCredentials,
  pserverTlsOf,
  readConfig,
  readNatsClientConfig,
  readServiceConfig,
  redactedUrl,
} from '#libs/config';

describe('config', () => {
  test('config - defaults apply and values parse', () => {
    const cfg = readServiceConfig({ port: ['PORT', env.int({ default: 0, min: 0, max: 65535 })] }, { PORT: '8080' });
    expect(cfg).toMatchObject({ natsUrl: 'nats://127.0.0.1:4222', redisUrl: 'redis://127.0.0.1:6379', port: 8080 });
  });

  test('config - every bad variable is named with its reason', () => {
    const read = () =>
      readServiceConfig(
        { port: ['PORT', env.int({ min: 0, max: 65535 })], shard: ['SHARD', env.int({ min: 0 })] },
        { NATS_URL: 'http://x:1', REDIS_URL: 'not a url', PORT: '70000', SHARD: 'abc' },
      );
    expect(read).toThrow(ConfigErrors);
    try {
      read();
    } catch (err) {
      const vars = (err as ConfigErrors).errors.map((e) => e.variable).sort();
      expect(vars).toEqual(['NATS_URL', 'PORT', 'REDIS_URL', 'SHARD']);
      expect((err as Error).message).toContain('PORT: 70000 is outside 0..65535');
      expect((err as Error).message).toContain('SHARD: "abc" is not an integer');
      expect((err as Error).message).toContain('NATS_URL: "http://x:1" must use nats://');
    }
  });

  test('config - TRIBUTARY_JS_REPLICAS is 1 by default, and outside 1..5 is refused by name', () => {
    expect(readServiceConfig({}, {}).jsReplicas).toBe(1);
    expect(readServiceConfig({}, { TRIBUTARY_JS_REPLICAS: '3' }).jsReplicas).toBe(3);
    expect(() => readServiceConfig({}, { TRIBUTARY_JS_REPLICAS: '0' })).toThrow(
      'TRIBUTARY_JS_REPLICAS: 0 is outside 1..5',
    );
    expect(() => readServiceConfig({}, { TRIBUTARY_JS_REPLICAS: '6' })).toThrow(
      'TRIBUTARY_JS_REPLICAS: 6 is outside 1..5',
    );
    expect(() => readServiceConfig({}, { TRIBUTARY_JS_REPLICAS: 'three' })).toThrow(
      'TRIBUTARY_JS_REPLICAS: "three" is not an integer',
    );
  });

  test('config - a required variable that is missing is an error', () => {
    expect(() => readConfig({ s: ['S', env.string()] }, {})).toThrow('S: is required but not set');
  });

  test('config - oneOf and number', () => {
    expect(() => readConfig({ l: ['L', env.oneOf(['a', 'b'] as const)] }, { L: 'c' })).toThrow('must be one of a, b');
    expect(readConfig({ n: ['N', env.number({ min: 0 })] }, { N: '0.5' })).toEqual({ n: 0.5 });
  });

  test('config - TLS files must exist, and a certificate without its key names both variables', () => {
    const dir = mkdtempSync(join(tmpdir(), 'config-tls-'));
    try {
      const cert = join(dir, 'cert.pem');
      writeFileSync(cert, 'CERT');
      expect(() => readConfig(PSERVER_TLS_CONFIG, { PSERVER_TLS_CERT: cert })).toThrow(
        'PSERVER_TLS_CERT: is set but PSERVER_TLS_KEY is not',
      );
      expect(() => readConfig(PSERVER_TLS_CONFIG, { PSERVER_TLS_KEY: cert })).toThrow(
        'PSERVER_TLS_KEY: is set but PSERVER_TLS_CERT is not',
      );
      expect(() => readConfig(PSERVER_TLS_CONFIG, { PSERVER_TLS_CA: join(dir, 'missing.pem') })).toThrow(
        /PSERVER_TLS_CA: ".*missing\.pem" cannot be read \(ENOENT\)/,
      );
      expect(() => readConfig(PSERVER_TLS_CONFIG, { PSERVER_TLS_CA: dir })).toThrow('is not a file');
      expect(() => readConfig(PSERVER_SERVER_TLS_CONFIG, { PSERVER_TLS_CA: cert })).toThrow(
        'PSERVER_TLS_CA: is set but PSERVER_TLS_CERT is not',
      );
      expect(() => readServiceConfig({}, { REDIS_TLS_KEY: cert })).toThrow(
        'REDIS_TLS_KEY: is set but REDIS_TLS_CERT is not',
      );
      const cfg = readConfig(PSERVER_TLS_CONFIG, {
        PSERVER_TLS_CERT: cert,
        PSERVER_TLS_KEY: cert,
        PSERVER_TLS_CA: cert,
      });
      expect(pserverTlsOf(cfg)).toEqual({
        cert: Buffer.from('CERT'),
        key: Buffer.from('CERT'),
        ca: Buffer.from('CERT'),
      });
      expect(pserverTlsOf(readConfig(PSERVER_TLS_CONFIG, {}))).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('config - NATS client settings', () => {
  let dir: string;
  let seed: string;
  let pem: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'nats-config-'));
    seed = join(dir, 'user.nk');
    writeFileSync(seed, `SU${'A'.repeat(56)}\n`);
    pem = join(dir, 'ca.pem');
    writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const errorsOf = (source: Record<string, string>): string[] => {
    try {
      readNatsClientConfig(source);
    } catch (err) {
      return (err as ConfigErrors).errors.map((e) => e.message);
    }
    return [];
  };

  test('NATS client settings - files are read from the variables and must exist as files', () => {
    expect(readNatsClientConfig({ NATS_NKEY: seed, NATS_TLS_CA: pem })).toMatchObject({
      natsUrl: 'nats://127.0.0.1:4222',
      natsNkey: seed,
      natsTlsCa: pem,
    });
    expect(errorsOf({ NATS_CREDS: join(dir, 'absent.creds') })).toEqual([
      `NATS_CREDS: file "${join(dir, 'absent.creds')}" does not exist`,
    ]);
    expect(errorsOf({ NATS_TLS_CA: dir })).toEqual([`NATS_TLS_CA: "${dir}" is not a file`]);
  });

  test('NATS client settings - a file of the wrong kind is named, its contents never quoted', () => {
    expect(errorsOf({ NATS_NKEY: pem, NATS_TLS_CA: seed, NATS_CREDS: seed }).sort()).toEqual([
      `NATS_CREDS: "${seed}" is not a .creds file (a user JWT and an NKey seed)`,
      `NATS_NKEY: "${pem}" does not hold an NKey user seed (SU...)`,
      'NATS_NKEY: set only one way to authenticate to NATS; found NATS_CREDS, NATS_NKEY',
      `NATS_TLS_CA: "${seed}" is not PEM (a CA certificate)`,
    ]);
  });

  test('NATS client settings - two ways to authenticate are refused, naming both', () => {
    expect(errorsOf({ NATS_NKEY: seed, NATS_TOKEN: 't' })).toEqual([
      'NATS_TOKEN: set only one way to authenticate to NATS; found NATS_NKEY, NATS_TOKEN',
    ]);
    expect(errorsOf({ NATS_URL: 'nats://u:p@h:4222', NATS_USER: 'u', NATS_PASSWORD: 'p' })).toEqual([
      'NATS_URL: set only one way to authenticate to NATS; found NATS_USER, credentials in NATS_URL',
    ]);
  });

  test('NATS client settings - a user needs its password, a certificate its key', () => {
    expect(errorsOf({ NATS_USER: 'u' })).toEqual(['NATS_PASSWORD: is required when NATS_USER is set']);
    expect(errorsOf({ NATS_PASSWORD: 'p' })).toEqual(['NATS_USER: is required when NATS_PASSWORD is set']);
    expect(errorsOf({ NATS_TLS_CERT: pem })).toEqual(['NATS_TLS_KEY: is required when NATS_TLS_CERT is set']);
  });

  test('NATS client settings - credentials in the URL are taken out of it, and must agree across servers', () => {
    expect(natsUrlCredentials('nats://al%40ce:p%3Ass@a:4222,nats://al%40ce:p%3Ass@b:4222')).toEqual({
      user: 'al@ce',
      password: 'p:ss',
    });
    expect(natsUrlCredentials('nats://s3cret@a:4222')).toEqual({ token: 's3cret' });
    expect(natsUrlCredentials('nats://a:4222')).toBeUndefined();
    expect(natsServersOf('nats://u:p@a:4222, tls://t@b:4223')).toEqual(['nats://a:4222', 'tls://b:4223']);
    expect(errorsOf({ NATS_URL: 'nats://u:p@a:4222,nats://u:q@b:4222' })).toEqual([
      'NATS_URL: its servers carry different credentials',
    ]);
  });

  test('NATS client settings - a service reads them with its own and checks them together', () => {
    expect(() => readServiceConfig({}, { NATS_TOKEN: 't', NATS_USER: 'u' })).toThrow(
      'NATS_PASSWORD: is required when NATS_USER is set',
    );
  });

  test('redacted URL - passwords and tokens become ***, the rest stays', () => {
    expect(redactedUrl('nats://u:secret@a:4222,nats://tok@b:4222,nats://c:4222')).toBe(
      'nats://u:***@a:4222,nats://***@b:4222,nats://c:4222',
    );
    expect(redactedUrl('rediss://tributary:pw@127.0.0.1:6380')).toBe('rediss://tributary:***@127.0.0.1:6380');
  });
});
