import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { MemberStatus } from '#libs/messaging';
import { pairedSlices } from './paired-slices.js';

/** A stand-in trainer: counts samples as fast as its event loop turns, on a metrics page. */
const COUNTER = `
const { createServer } = require('node:http');
let samples = 0;
const server = createServer((req, res) => res.end('tributary_trainer_samples_total{job="t"} ' + samples + '\\n'));
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
const tick = () => { samples += 1; setImmediate(tick); };
tick();
`;

/** The process's state letter in `/proc/<pid>/stat` (`T` when stopped). */
function processState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** Waits up to 100 ms for `pid` to show as stopped; its state then. */
function stateOnceStopped(pid: number): string {
  const until = Date.now() + 100;
  let state = processState(pid);
  while (state !== 'T' && Date.now() < until) state = processState(pid);
  return state;
}

describe('paired slices', () => {
  let child: ChildProcess | undefined;

  afterEach(() => {
    child?.kill('SIGKILL');
    child = undefined;
  });

  it('paired slices - the trainer is held while the learner alone steps, timed while it waits, and let go at the end', async () => {
    child = spawn(process.execPath, ['-e', COUNTER], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    const { port } = JSON.parse(String(line)) as { port: number };
    const pid = child.pid!;
    const trainer = { id: 'trainer-t', pid, metricsUrl: `http://127.0.0.1:${port}/metrics` } as MemberStatus;
    const statesWhileStepping = new Set<string>();
    let steps = 0;
    let warmUps = 0;
    const alone = {
      step: async () => {
        statesWhileStepping.add(stateOnceStopped(pid));
        steps++;
        await new Promise((resolve) => setImmediate(resolve));
      },
      warmUp: async () => {
        statesWhileStepping.add(stateOnceStopped(pid));
        warmUps++;
      },
      shutdown: () => undefined,
    };
    const lines: string[] = [];

    const slices = await pairedSlices(trainer, alone, {
      batchSize: 64,
      warmUpSeconds: 0.05,
      pairs: 4,
      sliceSeconds: 0.1,
      say: (l) => lines.push(l),
    });

    expect(warmUps).toBe(1);
    expect(steps).toBeGreaterThan(0);
    expect([...statesWhileStepping]).toEqual(['T']);
    expect(slices.trainer).toHaveLength(4);
    expect(slices.alone).toHaveLength(4);
    expect(slices.trainer.every((rate) => rate > 0)).toBe(true);
    expect(slices.ratios).toEqual(slices.trainer.map((rate, i) => rate / slices.alone[i]!));
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(/^paired slices, pair 1 of 4: trainer \d+, learner alone \d+ samples\/s/);
    // Let go: it runs and counts on.
    expect(processState(pid)).not.toBe('T');
    const count = async (): Promise<number> =>
      Number((await (await fetch(trainer.metricsUrl!)).text()).trim().split(' ').pop());
    const first = await count();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await count()).toBeGreaterThan(first);
  });

  it('paired slices - a trainer that cannot be read is let go and the error names it', async () => {
    child = spawn(process.execPath, ['-e', 'setInterval(() => undefined, 1000)'], { stdio: 'ignore' });
    await once(child, 'spawn');
    const pid = child.pid!;
    const trainer = { id: 'trainer-x', pid } as MemberStatus;
    const alone = { step: async () => undefined, warmUp: async () => undefined, shutdown: () => undefined };

    await expect(
      pairedSlices(trainer, alone, {
        batchSize: 64,
        warmUpSeconds: 0,
        pairs: 2,
        sliceSeconds: 0.05,
        say: () => undefined,
      }),
    ).rejects.toThrow('trainer trainer-x reports no metrics address');
    expect(processState(pid)).not.toBe('T');
  });
});
