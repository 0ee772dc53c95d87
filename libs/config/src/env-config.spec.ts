import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConfigErrors,
  PSERVER_SERVER_TLS_CONFIG,
  PSERVER_TLS_CONFIG,
  env,
  pserverTlsOf,
  readConfig,
  readServiceConfig,
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
