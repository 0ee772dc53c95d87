import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allowedCpus, formatCpuList, parseCpuList } from './cpu-affinity.js';

describe('cpu affinity', () => {
  it('cpu affinity - a CPU list reads as the kernel writes it; anything else is named', () => {
    expect(parseCpuList('0')).toEqual([0]);
    expect(parseCpuList('0-3,8,10-11\n')).toEqual([0, 1, 2, 3, 8, 10, 11]);
    for (const bad of ['', '1-', 'a', '3-1', '0,,1', '-2']) {
      expect(() => parseCpuList(bad)).toThrow(`"${bad}" is not a CPU list`);
    }
  });

  it("cpu affinity - the CPUs come from the process's status file, or say why they cannot", () => {
    const dir = mkdtempSync(join(tmpdir(), 'tributary-cpus-'));
    try {
      const status = join(dir, 'status');
      writeFileSync(status, 'Name:\tnode\nCpus_allowed:\t0f\nCpus_allowed_list:\t2-3,6\nMems_allowed:\t1\n');
      expect(allowedCpus(status)).toEqual([2, 3, 6]);
      writeFileSync(status, 'Name:\tnode\n');
      expect(allowedCpus(status)).toEqual({ unknown: `${status} has no Cpus_allowed_list` });
      expect(allowedCpus(join(dir, 'missing'))).toEqual({
        unknown: expect.stringContaining('cannot be read') as string,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('cpu affinity - a list of CPUs is written back as the kernel writes it, runs as ranges', () => {
    expect(formatCpuList([0])).toBe('0');
    expect(formatCpuList([11, 0, 1, 2, 3, 8, 10, 3])).toBe('0-3,8,10-11');
    expect(formatCpuList([])).toBe('');
    for (const list of ['0', '0-1', '2-3,6', '0-3,8,10-11', '1,3,5'])
      expect(formatCpuList(parseCpuList(list))).toBe(list);
  });
});
