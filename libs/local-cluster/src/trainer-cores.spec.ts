import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TrainerPinningError, onPath, trainerCores } from './trainer-cores.js';

describe('trainer cores', () => {
  it('trainer cores - auto pins one trainer per core when there is a core for each, and says so', () => {
    expect(trainerCores('auto', 2, { cpus: [0, 1], taskset: '/usr/bin/taskset' })).toEqual({
      cores: [0, 1],
      taskset: '/usr/bin/taskset',
      line: 'trainers pinned to cores 0, 1 (--pin-trainers off lets them move)',
    });
    // The CPUs the process may use, not 0..n-1 (a container's cpuset).
    expect(trainerCores('auto', 1, { cpus: [4, 5, 7], taskset: '/bin/taskset' }).cores).toEqual([4]);
    // Fewer cores than trainers, or one core: the scheduler shares them out.
    expect(trainerCores('auto', 3, { cpus: [0, 1], taskset: '/bin/taskset' })).toEqual({
      cores: [undefined, undefined, undefined],
      line: 'trainers not pinned to cores: 3 trainers on 2 cores',
    });
    expect(trainerCores('auto', 1, { cpus: [0], taskset: '/bin/taskset' }).line).toBe(
      'trainers not pinned to cores: 1 trainer on 1 core',
    );
  });

  it('trainer cores - on pins round-robin or fails naming why; off and auto without the means leave them', () => {
    expect(trainerCores('on', 3, { cpus: [0, 1], taskset: '/bin/taskset' }).cores).toEqual([0, 1, 0]);
    expect(() => trainerCores('on', 2, { cpus: [0, 1], taskset: undefined })).toThrow(TrainerPinningError);
    expect(() => trainerCores('on', 2, { cpus: { unknown: 'no status' }, taskset: '/bin/taskset' })).toThrow(
      '--pin-trainers on: no status',
    );
    expect(trainerCores('auto', 2, { cpus: [0, 1], taskset: undefined })).toEqual({
      cores: [undefined, undefined],
      line: 'trainers not pinned to cores: no taskset on PATH',
    });
    expect(trainerCores('off', 2, { cpus: [0, 1], taskset: '/bin/taskset' }).line).toBe(
      'trainers not pinned to cores: --pin-trainers off',
    );
  });

  it('trainer cores - a command is found on PATH only where it is executable', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tributary-path-'));
    try {
      writeFileSync(join(dir, 'plain'), '', { mode: 0o644 });
      writeFileSync(join(dir, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
      expect(onPath('tool', `/nonexistent:${dir}`)).toBe(join(dir, 'tool'));
      expect(onPath('plain', dir)).toBeUndefined();
      expect(onPath('tool', '')).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
