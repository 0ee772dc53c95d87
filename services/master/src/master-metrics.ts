import { Inject, Injectable } from '@nestjs/common';
import type { Histogram } from 'prom-client';
import { LONG_DURATION_BUCKETS_SECONDS, type ServiceMetrics } from '#libs/service-metrics';
import { SERVICE_METRICS } from '#libs/service-runtime';
import type { TaskCounts } from '#libs/messaging';
import type { JobDriver } from './job-driver.js';
import type { LeaderDuty } from './leader-duty.js';
import { JobRoster } from './job-roster.js';
import type { TaskStatus } from './task-queue.js';

const TASK_STATES: readonly TaskStatus[] = ['todo', 'pending', 'done', 'discarded'];

/**
 * The master's Prometheus metrics: whether it leads and, while it does, each running job's
 * tasks by state (this epoch, and the next while it is open), epoch, and the duration of the
 * tasks done.
 */
@Injectable()
export class MasterMetrics implements LeaderDuty {
  private leading = false;
  private readonly taskSeconds: Histogram<'job'>;

  constructor(@Inject(SERVICE_METRICS) metrics: ServiceMetrics, @Inject(JobRoster) roster: JobRoster) {
    const running = () => (this.leading ? roster.running() : []);
    const leading = () => this.leading;
    metrics.gauge({
      name: 'tributary_master_leader',
      help: '1 while this master leads, 0 while it stands by.',
      labelNames: [],
      collect() {
        this.set(leading() ? 1 : 0);
      },
    });
    /** A gauge of each running job's tasks by state, as `countsOf` counts them (none: no samples). */
    const tasksGauge = (name: string, help: string, countsOf: (driver: JobDriver) => TaskCounts | undefined) =>
      metrics.gauge({
        name,
        help,
        labelNames: ['job', 'state'],
        collect() {
          this.reset();
          for (const driver of running()) {
            const counts = countsOf(driver);
            if (counts === undefined) continue;
            for (const state of TASK_STATES) this.set({ job: driver.jobId, state }, counts[state]);
          }
        },
      });
    tasksGauge(
      'tributary_master_tasks',
      "Each running job's tasks in the current epoch by state: todo, pending, done, discarded.",
      (driver) => driver.epochTasks(),
    );
    tasksGauge(
      'tributary_master_next_epoch_tasks',
      "Each running job's tasks in the next epoch by state, while that epoch's tasks go out beside " +
        "the current one's (epochs overlap by one): todo, pending, done, discarded.",
      (driver) => driver.nextEpochTasks(),
    );
    metrics.gauge({
      name: 'tributary_master_epoch',
      help: "Each running job's current epoch.",
      labelNames: ['job'],
      collect() {
        this.reset();
        for (const driver of running()) this.set({ job: driver.jobId }, driver.status().epoch);
      },
    });
    this.taskSeconds = metrics.histogram({
      name: 'tributary_master_task_duration_seconds',
      help: 'From the claim of a task to its done report.',
      labelNames: ['job'],
      buckets: LONG_DURATION_BUCKETS_SECONDS,
    });
    roster.onTaskDone = (jobId, durationMs) => this.taskSeconds.observe({ job: jobId }, durationMs / 1_000);
  }

  async takeOffice(): Promise<void> {
    this.leading = true;
  }

  async leaveOffice(): Promise<void> {
    this.leading = false;
  }
}
