import { Logger } from '@nestjs/common';
import { CENSUS_WAIT_TICKS, DispatchLoop } from './dispatch-loop.js';
import type { JobRoster } from './job-roster.js';
import type { JobDriver } from './job-driver.js';
import type { TrainerCensus } from './trainer-census.js';

const TICK_MS = 10;

/**
 * A job runner that records the trainer counts it was ticked with, and -1 for each time its
 * claims were re-armed; `hang` makes its ticks never end.
 */
function fakeRunner(jobId: string, hang = false) {
  const ticks: number[] = [];
  const runner = {
    jobId,
    running: true,
    rearmClaims: async () => {
      ticks.push(-1);
      return 0;
    },
    tick: (trainers: number) => {
      ticks.push(trainers);
      return hang ? new Promise<void>(() => undefined) : Promise.resolve();
    },
  };
  return { runner: runner as unknown as JobDriver, ticks };
}

/** A census whose refresh never answers (a listing stuck on a NATS restart), last count `last`. */
function stuckCensus(last: number) {
  return { refresh: () => new Promise<number>(() => undefined), count: () => last } as unknown as TrainerCensus;
}

function loop(
  runners: JobDriver[],
  census: TrainerCensus,
  contact = { isConnected: true, reconnections: 0 },
): DispatchLoop {
  const directory = { running: () => runners } as unknown as JobRoster;
  return new DispatchLoop(directory, census, { tickMs: TICK_MS }, contact);
}

async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, TICK_MS));
  }
}

describe('dispatch loop', () => {
  beforeAll(() => Logger.overrideLogger(['error']));
  afterAll(() => Logger.overrideLogger(['log', 'warn', 'error']));

  test('dispatch loop - a trainer count that never answers does not stop jobs from being ticked with the last count', async () => {
    const job = fakeRunner('new-job');
    const dispatch = loop([job.runner], stuckCensus(2));
    await dispatch.takeOffice();
    // Every pass gives up on the count after CENSUS_WAIT_TICKS periods and ticks the job anyway.
    await until('three ticks of the job', () => job.ticks.length >= 3, 100 * TICK_MS * CENSUS_WAIT_TICKS);
    expect(job.ticks.every((n) => n === 2)).toBe(true);
    await dispatch.leaveOffice();
  });

  test('dispatch loop - a job whose tick never ends does not hold up the ticks of another job', async () => {
    const stuck = fakeRunner('stuck-job', true);
    const other = fakeRunner('other-job');
    const census = { refresh: async () => 3, count: () => 3 } as unknown as TrainerCensus;
    const dispatch = loop([stuck.runner, other.runner], census);
    await dispatch.takeOffice();
    await until('five ticks of the other job', () => other.ticks.length >= 5);
    // The stuck job was ticked once: its next ticks are skipped while the first is in flight.
    expect(stuck.ticks).toEqual([3]);
    expect(other.ticks.every((n) => n === 3)).toBe(true);
    // Leaving office stops the timer at once; it would wait for the stuck tick forever.
    void dispatch.leaveOffice();
  });
  test('dispatch loop - cut off from NATS it ticks no job; back, it re-arms every claim before ticking again', async () => {
    const job = fakeRunner('job');
    const census = { refresh: async () => 1, count: () => 1 } as unknown as TrainerCensus;
    const contact = { isConnected: false, reconnections: 0 };
    const dispatch = loop([job.runner], census, contact);
    await dispatch.takeOffice();
    await new Promise((r) => setTimeout(r, 10 * TICK_MS));
    expect(job.ticks).toEqual([]);
    contact.isConnected = true;
    contact.reconnections = 1;
    await until('ticks after the reconnection', () => job.ticks.length >= 3);
    expect(job.ticks.slice(0, 3)).toEqual([-1, 1, 1]);
    await dispatch.leaveOffice();
  });

  test('dispatch loop - dispatchNow ticks a job started between two periods at once; one asked for during a pass follows it', async () => {
    const first = fakeRunner('first');
    const runners = [first.runner];
    // The second count is held until released, so that the pass it belongs to stays under way.
    let counts = 0;
    let release!: () => void;
    const census = {
      refresh: () => {
        counts += 1;
        return counts === 2 ? new Promise<number>((r) => (release = () => r(2))) : Promise.resolve(2);
      },
      count: () => 2,
    } as unknown as TrainerCensus;
    const directory = { running: () => runners } as unknown as JobRoster;
    // A period far longer than the test: every pass after the first is one that was asked for.
    const dispatch = new DispatchLoop(directory, census, { tickMs: 600_000 }, { isConnected: true, reconnections: 0 });
    dispatch.dispatchNow();
    expect(counts).toBe(0);
    await dispatch.takeOffice();
    await until('the first pass', () => first.ticks.length === 1);

    const second = fakeRunner('second');
    runners.push(second.runner);
    dispatch.dispatchNow();
    await until('the second count asked for', () => counts === 2);
    dispatch.dispatchNow();
    dispatch.dispatchNow();
    release();
    await until('the new job ticked by both passes', () => second.ticks.length === 2);
    // The two asks during the second pass made one more pass, not two.
    await new Promise((r) => setTimeout(r, 50));
    expect(counts).toBe(3);
    expect(first.ticks).toEqual([2, 2, 2]);
    await dispatch.leaveOffice();
    dispatch.dispatchNow();
    await new Promise((r) => setTimeout(r, 50));
    expect(counts).toBe(3);
  });
});
