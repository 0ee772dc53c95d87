import { SERVICE_MALLOC_TUNABLES, withServiceMalloc } from './service-node-flags.js';

describe('service malloc settings', () => {
  test('service malloc - added to an environment without tunables, the rest kept', () => {
    const env = { PATH: '/bin' };
    expect(withServiceMalloc(env)).toEqual({ PATH: '/bin', GLIBC_TUNABLES: SERVICE_MALLOC_TUNABLES });
    expect(env).toEqual({ PATH: '/bin' });
  });

  test("service malloc - the user's own tunables come after ours, so they win", () => {
    const env = { GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=0' };
    expect(withServiceMalloc(env).GLIBC_TUNABLES).toBe(`${SERVICE_MALLOC_TUNABLES}:glibc.malloc.trim_threshold=0`);
  });

  test('service malloc - an environment that has them already is returned as it is', () => {
    const env = { GLIBC_TUNABLES: `${SERVICE_MALLOC_TUNABLES}:glibc.malloc.arena_max=2` };
    expect(withServiceMalloc(env)).toBe(env);
  });
});
