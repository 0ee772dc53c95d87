import { Writable } from 'node:stream';
import type { CliIo } from '../../cli/cli-io.js';
import { main } from '../../cli/main.js';

/** A stream that keeps what is written to it. */
export class Capture extends Writable {
  text = '';
  isTTY: boolean;
  constructor(isTTY = false) {
    super();
    this.isTTY = isTTY;
  }
  override _write(chunk: Buffer | string, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** What one in-process `tributary` run printed and returned. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the `tributary` CLI in-process with captured output. */
export async function runCli(
  argv: string[],
  options: { env?: Record<string, string>; tty?: boolean } = {},
): Promise<CliRun> {
  const stdout = new Capture();
  const stderr = new Capture(options.tty ?? false);
  const io: CliIo = { stdout, stderr, env: options.env ?? {} };
  const code = await main(argv, io);
  return { code, stdout: stdout.text, stderr: stderr.text };
}
