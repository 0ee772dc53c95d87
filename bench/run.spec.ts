import { benchResult } from './bench-result.js';
import { BENCHMARKS, parseBenchArgs, resultRows, usage } from './run.js';

describe('bench runner', () => {
  it('bench runner - no names runs the quick benchmarks; names run those, in order', () => {
    const quick = BENCHMARKS.filter((b) => b.quick).map((b) => b.name);
    expect(quick).toEqual(['overhead', 'scaling', 'exchange', 'cnn-step', 'kernels']);
    expect(parseBenchArgs([])).toEqual({ names: quick, json: undefined, help: false });
    expect(parseBenchArgs(['tta', 'exchange', '--json', 'out.json'])).toEqual({
      names: ['tta', 'exchange'],
      json: 'out.json',
      help: false,
    });
  });

  it('bench runner - a wrong benchmark or flag is refused by name', () => {
    expect(() => parseBenchArgs(['overhead', 'speed'])).toThrow("unknown benchmark 'speed'");
    expect(() => parseBenchArgs(['--fast'])).toThrow(/--fast/);
    expect(() => parseBenchArgs(['--json'])).toThrow(/--json/);
    expect(usage()).toContain('usage: npm run bench -- [NAME...] [--json FILE]');
  });

  it('bench runner - a result holds its ratio to the target in the right direction', () => {
    const faster = benchResult({ name: 'a', figure: 90, unit: 'x/s', baseline: 100, target: 0.85 });
    expect(faster).toMatchObject({ ratio: 0.9, met: true });
    const slower = benchResult({ name: 't', figure: 24, unit: 's', baseline: 25, target: 0.8, lowerIsBetter: true });
    expect(slower).toMatchObject({ ratio: 0.96, met: false });
    expect(JSON.parse(JSON.stringify(slower))).toEqual(
      expect.objectContaining({ name: 't', figure: 24, unit: 's', baseline: 25, ratio: 0.96, target: 0.8, met: false }),
    );
    expect(resultRows([slower])[0]).toBe('missed t: 24 s vs 25 s, ratio 0.96 (target <= 0.8)');
  });
});
