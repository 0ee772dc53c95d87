import type { Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { randomBytes } from 'node:crypto';
import { jetstream, DeliverPolicy } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { InvalidJobSpecError, parseJobSpec } from '#libs/job-spec';
import { MasterClient } from '#libs/master-client';
import { KV_BUCKETS, STREAMS, SUBJECTS, type JobEvent, type NatsConnection } from '#libs/messaging';
import { CommandExit, type CliIo } from '../cli-io.js';
import { connectCli } from '../cluster-connection.js';
import { JobProgress, type StatusSnapshot } from '../job-progress.js';

/** How often `submit --wait` asks the master for counters. */
const STATUS_POLL_MS = 2_000;
/** How long `submit --wait` waits for the model export after the job stopped. */
const EXPORT_GRACE_MS = 60_000;
/** On a non-terminal output, how often a progress line is printed. */
const PLAIN_PROGRESS_EVERY_MS = 15_000;

interface NatsFlag {
  nats?: string;
}

async function uniqueJobId(nc: NatsConnection, wanted: string): Promise<string> {
  const kv = await new Kvm(nc).create(KV_BUCKETS.jobs, { history: 1 });
  const taken = async (id: string) => {
    const e = await kv.get(id);
    return e !== null && e.operation === 'PUT';
  };
  if (!(await taken(wanted))) return wanted;
  for (;;) {
    const id = `${wanted.slice(0, 54)}-${randomBytes(3).toString('hex')}`;
    if (!(await taken(id))) return id;
  }
}

async function watch(nc: NatsConnection, io: CliIo, jobId: string, metric: string): Promise<number> {
  const progress = new JobProgress(jobId, metric);
  const client = new MasterClient(nc, 'tributary-cli');
  const tty = io.stderr.isTTY === true;
  let drawn = false;
  const print = (line: string) => {
    io.stderr.write(`${tty && drawn ? '\r\x1b[K' : ''}${line}\n`);
    drawn = false;
  };
  const draw = () => {
    if (!tty) return;
    io.stderr.write(`\r\x1b[K${progress.line()}`);
    drawn = true;
  };
  const consumer = await jetstream(nc).consumers.get(STREAMS.events.name, {
    filter_subjects: SUBJECTS.events(jobId),
    deliver_policy: DeliverPolicy.All,
  });
  const messages = await consumer.consume();
  let lastPlain = 0;
  const poll = setInterval(() => {
    client
      .jobStatus(jobId)
      .then((s) => {
        progress.onStatus(s as StatusSnapshot);
        if (tty) draw();
        else if (Date.now() - lastPlain >= PLAIN_PROGRESS_EVERY_MS) {
          lastPlain = Date.now();
          print(progress.line());
        }
      })
      .catch(() => undefined);
  }, STATUS_POLL_MS);
  const ticker = setInterval(() => {
    const stoppedAt = progress.stoppedAt;
    if (stoppedAt !== undefined && Date.now() - stoppedAt > EXPORT_GRACE_MS) void messages.close();
  }, 1000);
  try {
    for await (const m of messages) {
      let event: JobEvent;
      try {
        event = m.json<JobEvent>();
      } catch {
        continue;
      }
      const line = progress.onEvent(event);
      if (line) print(line);
      if (event.type === 'metrics') draw();
      const outcome = progress.outcome(false);
      if (outcome) {
        print(outcome.line);
        return outcome.exitCode;
      }
    }
    const outcome = progress.outcome(true);
    print(outcome?.line ?? `stopped watching job ${jobId}`);
    return outcome?.exitCode ?? 1;
  } finally {
    clearInterval(poll);
    clearInterval(ticker);
    await messages.close().catch(() => undefined);
  }
}

async function submit(io: CliIo, file: string, flags: NatsFlag & { wait?: boolean; id?: string }): Promise<void> {
  const text = await readFile(file, 'utf8').catch((err: Error) => {
    throw new Error(`cannot read job spec ${file}: ${err.message}`);
  });
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new Error(`${file}: not JSON: ${(err as Error).message}`, { cause: err });
  }
  const nc = await connectCli(io, flags.nats);
  try {
    const wanted =
      flags.id ??
      (typeof raw.id === 'string'
        ? raw.id
        : basename(file)
            .replace(/\.json$/, '')
            .toLowerCase());
    raw.id = await uniqueJobId(nc, wanted);
    // Validate here too, so a bad spec is reported at once with every field at fault.
    let metric = 'accuracy';
    try {
      const spec = parseJobSpec(JSON.stringify(raw));
      metric = spec.evaluation.metric;
    } catch (err) {
      if (err instanceof InvalidJobSpecError) {
        io.stderr.write(`${file}: ${err.message}\n`);
        throw new CommandExit(2);
      }
      throw err;
    }
    await new MasterClient(nc, 'tributary-cli').submitJob(raw);
    io.stdout.write(`submitted job ${String(raw.id)}\n`);
    if (flags.wait) {
      const code = await watch(nc, io, String(raw.id), metric);
      if (code !== 0) throw new CommandExit(code);
    }
  } finally {
    await nc.close();
  }
}

async function status(io: CliIo, jobId: string, flags: NatsFlag): Promise<void> {
  const nc = await connectCli(io, flags.nats);
  try {
    const s = await new MasterClient(nc, 'tributary-cli').jobStatus(jobId);
    io.stdout.write(`${JSON.stringify(s, null, 2)}\n`);
  } finally {
    await nc.close();
  }
}

async function stop(io: CliIo, jobId: string, flags: NatsFlag): Promise<void> {
  const nc = await connectCli(io, flags.nats);
  try {
    await new MasterClient(nc, 'tributary-cli').stopJob(jobId, 'manual');
    io.stdout.write(`stop requested for job ${jobId}\n`);
  } finally {
    await nc.close();
  }
}

/** Registers `submit`, `status` and `stop`. */
export function register(program: Command, io: CliIo): void {
  program
    .command('submit')
    .description('submit a job spec; with --wait, show progress until the job stops')
    .argument('<file>', 'job spec (JSON)')
    .option('--wait', 'follow the job; exit 0 when it stops at its target, non-zero otherwise')
    .option('--id <id>', "job id (default: the spec's id; a suffix is added when that id was used before)")
    .option('--nats <url>', 'NATS URL (default: NATS_URL, or the local cluster)')
    .action((file: string, flags: NatsFlag & { wait?: boolean; id?: string }) => submit(io, file, flags));
  program
    .command('status')
    .description("print a job's state and counters (JSON)")
    .argument('<job-id>')
    .option('--nats <url>', 'NATS URL')
    .action((jobId: string, flags: NatsFlag) => status(io, jobId, flags));
  program
    .command('stop')
    .description('stop a job by hand')
    .argument('<job-id>')
    .option('--nats <url>', 'NATS URL')
    .action((jobId: string, flags: NatsFlag) => stop(io, jobId, flags));
}
