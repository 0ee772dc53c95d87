import { performance } from 'node:perf_hooks';
import type { WireTimes } from '#libs/pserver-protocol';

/**
 * The phases of one training step, as the training loop times them:
 * - `wait`: pulling parameters (the pull call, including the pserver's wait for the version);
 * - `decode`: reading and decoding the minibatch's records, and assembling the minibatches that
 *   come next while a push or a pull waits (`MinibatchReader.prepareWhile`);
 * - `load`: loading pulled parameters into the learner;
 * - `train`: the learner's forward and backward pass;
 * - `getUpdate`: reading the update out of the learner;
 * - `encode`: encoding the update's tensors into push messages, within the push;
 * - `push`: the push call less its encoding and unpacking: the transfer, and the pserver taking
 *   the push (and answering with the parameters, where it does);
 * - `unpack`: decoding the parameters that came back, within the push or the pull;
 * - `idle`: the rest of the step's wall time (bookkeeping, status, the event loop).
 *
 * `encode` and `unpack` are told apart from `push` and `wait` only when the phases are given the
 * process's wire clock; otherwise they stay 0 and the push and the pull include them. Likewise the
 * minibatches assembled during a push or a pull count as `decode`, not as the call's, only when
 * the phases are given the reader's assembly time.
 */
export const STEP_PHASES = [
  'wait',
  'decode',
  'load',
  'train',
  'getUpdate',
  'encode',
  'push',
  'unpack',
  'idle',
] as const;

/** One of {@link STEP_PHASES}. */
export type StepPhase = (typeof STEP_PHASES)[number];

/**
 * The network calls, whose codec time goes to `encode` and `unpack`, and the minibatches
 * assembled meanwhile to `decode`.
 */
const NETWORK_PHASES: ReadonlySet<StepPhase> = new Set(['wait', 'push']);

/** A running total of work done inside the network calls, and the phase it counts in. */
interface InnerClock {
  phase: Exclude<StepPhase, 'idle'>;
  /** Milliseconds of that work so far, on the phases' time scale. */
  read: () => number;
}

/**
 * Where the time of a trainer's steps goes: milliseconds spent in each phase, summed until
 * `take` returns them as means per step and starts a new window. `idle` is what the step's wall
 * time (from the end of the previous step) leaves over after the timed phases.
 */
export class StepPhases {
  private readonly totals = new Map<StepPhase, number>();
  private readonly current = new Map<StepPhase, number>();
  private steps = 0;
  private wallMs = 0;
  private stepStart: number | undefined;
  /** The work that runs inside a push or a pull and is counted in a phase of its own. */
  private readonly inner: InnerClock[] = [];

  /**
   * `onStep`, when given, receives each step's phases in milliseconds as it ends (for the
   * step-phase histograms), besides the windowed means of `take`. `wire`, when given, reads the
   * process's wire clock (`wireClock.read()`), and `assembly` the milliseconds the task's reader
   * has spent assembling minibatches (`MinibatchReader.assemblyMs`), both on the same time scale
   * as `now`.
   */
  constructor(
    private readonly now: () => number = () => performance.now(),
    private readonly onStep?: (phases: Record<StepPhase, number>) => void,
    wire?: () => WireTimes,
    assembly?: () => number,
  ) {
    if (wire !== undefined) {
      this.inner.push(
        { phase: 'encode', read: () => wire().encodeMs },
        { phase: 'unpack', read: () => wire().decodeMs },
      );
    }
    if (assembly !== undefined) this.inner.push({ phase: 'decode', read: assembly });
  }

  /**
   * Runs `fn` and adds its duration to `phase`; for `push` and `wait`, the encoding and decoding
   * done meanwhile go to `encode` and `unpack` instead, and the minibatches assembled meanwhile
   * to `decode`.
   */
  async time<T>(phase: Exclude<StepPhase, 'idle'>, fn: () => Promise<T> | T): Promise<T> {
    const start = this.now();
    const before = NETWORK_PHASES.has(phase) ? this.inner.map((clock) => clock.read()) : [];
    try {
      return await fn();
    } finally {
      let ms = this.now() - start;
      this.stepStart ??= start;
      before.forEach((readBefore, i) => {
        const clock = this.inner[i]!;
        const innerMs = clock.read() - readBefore;
        if (innerMs <= 0) return;
        this.add(clock.phase, innerMs);
        ms -= innerMs;
      });
      this.add(phase, Math.max(0, ms));
    }
  }

  /** Runs the synchronous `fn` and adds its duration to `phase`. */
  timeSync<T>(phase: Exclude<StepPhase, 'idle'>, fn: () => T): T {
    const start = this.now();
    try {
      return fn();
    } finally {
      this.add(phase, this.now() - start);
    }
  }

  /** Adds `ms` to `phase`. */
  add(phase: Exclude<StepPhase, 'idle'>, ms: number): void {
    this.stepStart ??= this.now() - ms;
    this.totals.set(phase, (this.totals.get(phase) ?? 0) + ms);
    if (this.onStep) this.current.set(phase, (this.current.get(phase) ?? 0) + ms);
  }

  /** Ends a step: its wall time runs from the end of the previous one (or its first phase). */
  endStep(): void {
    const now = this.now();
    const wallMs = now - (this.stepStart ?? now);
    this.wallMs += wallMs;
    this.stepStart = now;
    this.steps += 1;
    if (this.onStep) {
      const step = {} as Record<StepPhase, number>;
      let timed = 0;
      for (const phase of STEP_PHASES) {
        if (phase === 'idle') continue;
        step[phase] = this.current.get(phase) ?? 0;
        timed += step[phase];
      }
      step.idle = Math.max(0, wallMs - timed);
      this.current.clear();
      this.onStep(step);
    }
  }

  /** Forgets when the last step ended, so a pause between tasks does not count as idle. */
  pause(): void {
    this.stepStart = undefined;
  }

  /**
   * Mean milliseconds per step of each phase since the last call, rounded to 0.01 ms, then a new
   * window starts; undefined when no step ended since.
   */
  take(): Record<StepPhase, number> | undefined {
    if (this.steps === 0) return undefined;
    const mean = {} as Record<StepPhase, number>;
    let timed = 0;
    for (const phase of STEP_PHASES) {
      if (phase === 'idle') continue;
      const total = this.totals.get(phase) ?? 0;
      timed += total;
      mean[phase] = round(total / this.steps);
    }
    mean.idle = round(Math.max(0, this.wallMs - timed) / this.steps);
    this.totals.clear();
    this.steps = 0;
    this.wallMs = 0;
    return mean;
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
