import { ConfigErrors, env, readConfig, readServiceConfig } from '#libs/config';

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
});
