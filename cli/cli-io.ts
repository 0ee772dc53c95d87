import type { Writable } from 'node:stream';

/** Where a command writes, and the environment it reads; `process` in production, buffers in tests. */
export interface CliIo {
  /** Results (summaries, tables, records). */
  readonly stdout: Writable & { isTTY?: boolean };
  /** Progress, warnings and errors. */
  readonly stderr: Writable & { isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The process's own streams and environment. */
export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env };
}

/** Thrown by a command to end with a given exit code and no error message (the command has said why). */
export class CommandExit extends Error {
  override readonly name = 'CommandExit';
  constructor(readonly exitCode: number) {
    super(`exit ${exitCode}`);
  }
}

/**
 * Writes text to a stream with backpressure, and notices when the reader has gone away (EPIPE,
 * e.g. `tributary recordio cat ... | head`): from then on `write` returns false and writes
 * nothing, so the command can stop quietly. Other stream errors are rethrown on the next write.
 */
export class OutputStream {
  private failure: NodeJS.ErrnoException | undefined;
  private readonly onError = (err: NodeJS.ErrnoException): void => {
    this.failure ??= err;
    this.wake?.();
  };
  private wake: (() => void) | undefined;

  constructor(private readonly stream: Writable) {
    stream.on('error', this.onError);
  }

  /** True once the reader has closed the pipe. */
  get closed(): boolean {
    return this.failure?.code === 'EPIPE' || this.stream.destroyed;
  }

  /** Writes `text`, waiting for the stream to drain when its buffer is full; false when the output is closed. */
  async write(text: string): Promise<boolean> {
    this.check();
    if (this.closed) return false;
    if (!this.stream.write(text)) {
      await this.drained();
      this.check();
    }
    return !this.closed;
  }

  /** Stops listening for errors on the stream. */
  release(): void {
    this.stream.off('error', this.onError);
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.stream.off('drain', done);
        this.stream.off('close', done);
        this.wake = undefined;
        resolve();
      };
      this.wake = done;
      this.stream.on('drain', done);
      this.stream.on('close', done);
    });
  }

  private check(): void {
    if (this.failure !== undefined && this.failure.code !== 'EPIPE') throw this.failure;
  }
}
