import type { Command } from 'commander';
import { MasterClient } from '#libs/master-client';
import type { JobListEntry } from '#libs/messaging';
import type { CliIo } from '../cli-io.js';
import { connectCli } from '../cluster-connection.js';
import { formatTable } from '../table.js';

interface JobsFlags {
  all?: boolean;
  json?: boolean;
  nats?: string;
}

/** A metric value as a table shows it: four decimals, or empty when there is none. */
function metricCell(value: number | undefined): string {
  return value === undefined ? '' : value.toFixed(4);
}

/** `2026-01-02T03:04:05.678Z` as `2026-01-02 03:04:05`. */
function timeCell(iso: string): string {
  return iso
    .replace('T', ' ')
    .replace(/\.\d+Z$/, '')
    .replace(/Z$/, '');
}

/** The table `tributary jobs` prints, one line per job. */
export function jobsTable(jobs: readonly JobListEntry[]): string[] {
  const columns = ['ID', 'STATE', 'EPOCH', 'METRIC', 'LAST', 'BEST', 'TRAINERS', 'STARTED', 'OUTPUT'].map(
    (heading) => ({ heading, numeric: ['EPOCH', 'LAST', 'BEST', 'TRAINERS'].includes(heading) }),
  );
  return formatTable(
    columns,
    jobs.map((j) => [
      j.jobId,
      j.reason === undefined ? j.state : `${j.state} (${j.reason})`,
      String(j.epoch),
      j.metric,
      metricCell(j.lastValue),
      metricCell(j.best),
      String(j.trainers),
      timeCell(j.startedAt),
      j.output,
    ]),
  );
}

async function jobs(io: CliIo, flags: JobsFlags): Promise<void> {
  const nc = await connectCli(io, flags.nats);
  try {
    const reply = await new MasterClient(nc, 'tributary-cli').listJobs({ all: flags.all === true });
    if (flags.json) {
      io.stdout.write(`${JSON.stringify(reply.jobs, null, 2)}\n`);
      return;
    }
    if (reply.jobs.length === 0) {
      io.stdout.write(flags.all ? 'no jobs\n' : 'no running jobs (--all lists finished ones too)\n');
      return;
    }
    io.stdout.write(`${jobsTable(reply.jobs).join('\n')}\n`);
  } finally {
    await nc.close();
  }
}

/** Registers `jobs`. */
export function register(program: Command, io: CliIo): void {
  program
    .command('jobs')
    .description('list the jobs the master drives: id, state, epoch, metric and best, trainers, started, output')
    .option('--all', 'include finished jobs (kept for JOB_RETENTION_HOURS)')
    .option('--json', 'print JSON')
    .option('--nats <url>', 'NATS URL (default: NATS_URL, or the local cluster)')
    .action((flags: JobsFlags) => jobs(io, flags));
}
