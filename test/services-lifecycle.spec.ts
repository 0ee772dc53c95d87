import { readFileSync } from 'node:fs';
import { startTestServers, type TestServers } from './support/servers.js';
import { startService } from './support/service-process.js';

describe('services', () => {
  let servers: TestServers;

  beforeAll(async () => {
    servers = await startTestServers();
  });

  afterAll(async () => {
    await servers?.stop();
  });

  test.each(['master', 'pserver', 'trainer', 'evaluator'])(
    'services - %s starts against NATS and Redis, logs one readiness line and stops cleanly on SIGTERM',
    async (role) => {
      const svc = startService(role, {
        NATS_URL: servers.nats.url,
        REDIS_URL: servers.redis.url,
        PSERVER_SHARD: '0',
        PSERVER_DATA_DIR: `${servers.dir}/pserver-0`,
      });
      const out = await svc.waitFor(/\bready\b/);
      expect(out.match(/\bready\b/g)).toHaveLength(1);
      svc.child.kill('SIGTERM');
      const { code } = await svc.exited;
      expect(code).toBe(0);
    },
  );

  test('services - the evaluator runs at EVALUATOR_NICENESS so trainers sharing its cores go first', async () => {
    const svc = startService('evaluator', {
      NATS_URL: servers.nats.url,
      REDIS_URL: servers.redis.url,
      EVALUATOR_NICENESS: '7',
    });
    await svc.waitFor(/\bready\b/);
    expect(svc.output()).toContain('running at niceness 7');
    // Field 19 of /proc/PID/stat is the niceness; the command name before it is in parentheses.
    const stat = readFileSync(`/proc/${svc.child.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    expect(Number(fields[16])).toBe(7);
    svc.child.kill('SIGTERM');
    expect((await svc.exited).code).toBe(0);
  });

  test('services - a bad environment value is one clear error at start-up', async () => {
    const svc = startService('master', { NATS_URL: 'http://127.0.0.1:1', REDIS_URL: 'nope' });
    const { code } = await svc.exited;
    expect(code).toBe(2);
    expect(svc.output()).toContain('NATS_URL: "http://127.0.0.1:1" must use nats://');
    expect(svc.output()).toContain('REDIS_URL: "nope" is not a URL');
  });

  test.each([
    ['trainer', { NATS_CREDS: '/nonexistent/user.creds' }, 'NATS_CREDS: file "/nonexistent/user.creds" does not exist'],
    ['pserver', { NATS_USER: 'pserver' }, 'NATS_PASSWORD: is required when NATS_USER is set'],
    [
      'evaluator',
      { NATS_URL: 'nats://tok3n-secret@127.0.0.1:4222', NATS_TOKEN: 'other-secret' },
      'NATS_URL: set only one way to authenticate to NATS; found NATS_TOKEN, credentials in NATS_URL',
    ],
    ['master', { NATS_TLS_KEY: '/etc/hostname' }, 'NATS_TLS_KEY: "/etc/hostname" is not PEM (a private key)'],
    ['master', { NATS_NKEY: '/etc/hostname' }, 'NATS_NKEY: "/etc/hostname" does not hold an NKey user seed (SU...)'],
  ])(
    'services - the %s refuses bad NATS credentials settings at start-up, naming the variable and no secret',
    async (role, env, message) => {
      const svc = startService(role, {
        NATS_URL: servers.nats.url,
        REDIS_URL: servers.redis.url,
        PSERVER_SHARD: '0',
        ...env,
      });
      expect((await svc.exited).code).toBe(2);
      expect(svc.output()).toContain(message);
      expect(svc.output()).not.toMatch(/secret/);
    },
  );
});
