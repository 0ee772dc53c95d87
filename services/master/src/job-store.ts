import { createHash } from 'node:crypto';
import type { JobSpec } from '#libs/job-spec';
import type { EpochAccounting, RedisConnection, StopReason } from '#libs/messaging';
import { CorruptJobStateError, FencedWriteError, LostWritesError } from './errors.js';
import type { PlannedTask } from './task-plan.js';
import {
  KEPT_EPOCHS,
  type QueueChange,
  type QueueLifecycle,
  type QueueFields,
  type QueueSnapshot,
  type TaskState,
} from './task-queue.js';

/** Everything the master keeps about one job. */
export interface StoredJob {
  spec: JobSpec;
  plan: PlannedTask[];
  /** Stream sequence of the spec message the job came from, so a redelivery is recognised. */
  submitSeq: number;
  queue: QueueSnapshot;
  /**
   * How many writes Redis has applied to the job: its creation and every transition since, as
   * read back (absent on a job not written yet). Each write names the count it expects, so a
   * Redis that comes back from a crash without writes it answered is found out.
   */
  writes?: number;
  /** The fencing token of the term that wrote the job last ('' when unknown). */
  writer?: string;
}

/** A job's lifecycle state and submission, as read without loading the whole job. */
export interface StoredSubmission {
  state: string;
  submitSeq: number;
}

/** The Redis keys of one job. */
export interface JobKeys {
  /** Hash: spec, runId, submitSeq, state, reason, detail, epoch, startedAt, stoppedAt, samples, ... */
  job: string;
  /**
   * Hash: taskId → JSON `TaskState` of the current epoch, and `next:<taskId>` → the same of the
   * next epoch while that is open.
   */
  tasks: string;
  /** String: JSON `PlannedTask[]`. */
  plan: string;
  /** Hash: epoch → JSON `{done, discarded}` of each finished epoch. */
  epochs: string;
  /** Hash of epoch `n`: taskId → times counted done. */
  epoch(n: number): string;
}

/**
 * Applies one change atomically. KEYS: leader, jobs set, job, tasks, epoch summaries, plan,
 * counted epoch, then (whole writes only) epoch hashes to drop, refilled from `p.counts` in
 * order. ARGV[1]: fencing token or '' (unfenced); ARGV[2]: the change as JSON with every value
 * already a string (Lua's number formatting would mangle large integers); ARGV[3]: the job's
 * write count this change follows, or '' to apply it whatever the count; ARGV[4]: the count
 * after it, or '' to count one more write. A whole write (`p.whole`: a creation, or the job
 * rewritten from the master's memory) replaces the job, its tasks, its plan and the listed
 * epochs; a creation drops the summaries too. An epoch's end (`p.dropNext`) drops the next
 * epoch's task fields before the tasks are written. Returns the job's write count after the change;
 * 0 when the fence is not current; `{2, count}` when the job's write count is not ARGV[3].
 */
const APPLY_SCRIPT = `
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[3] ~= '' then
  local writes = redis.call('HGET', KEYS[3], 'writes') or '0'
  if writes ~= ARGV[3] then return {2, writes} end
end
local p = cjson.decode(ARGV[2])
if p.whole then
  for i = 8, #KEYS do redis.call('DEL', KEYS[i]) end
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[6])
  if p.create then redis.call('DEL', KEYS[5]) end
  redis.call('SET', KEYS[6], p.plan)
  redis.call('SADD', KEYS[2], p.jobId)
  for i, counts in ipairs(p.counts or {}) do
    for id, c in pairs(counts) do redis.call('HSET', KEYS[7 + i], id, c) end
  end
  for epoch, value in pairs(p.summaries or {}) do redis.call('HSET', KEYS[5], epoch, value) end
end
if p.dropNext then
  for _, field in ipairs(redis.call('HKEYS', KEYS[4])) do
    if string.sub(field, 1, 5) == 'next:' then redis.call('HDEL', KEYS[4], field) end
  end
end
for field, value in pairs(p.job) do redis.call('HSET', KEYS[3], field, value) end
for id, value in pairs(p.tasks) do redis.call('HSET', KEYS[4], id, value) end
if p.counted then redis.call('HINCRBY', KEYS[7], p.counted, 1) end
for _, closed in ipairs(p.closed or {}) do redis.call('HSET', KEYS[5], closed.epoch, closed.value) end
local count = tonumber(ARGV[4])
if count == nil then count = redis.call('HINCRBY', KEYS[3], 'writes', 1)
else redis.call('HSET', KEYS[3], 'writes', ARGV[4]) end
redis.call('HSET', KEYS[3], 'writer', ARGV[1])
return count
`;
const APPLY_SHA = createHash('sha1').update(APPLY_SCRIPT).digest('hex');

/**
 * Removes one job's keys. KEYS: leader, jobs set, then every key of the job (the job hash
 * first). ARGV[1]: fencing token or ''; ARGV[2]: the job id; ARGV[3]: the run id the job must
 * still have. Returns 1, 2 when another run of the id is stored, or 0 when the fence is not current.
 */
const REMOVE_SCRIPT = `
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local runId = redis.call('HGET', KEYS[3], 'runId')
if runId and runId ~= ARGV[3] then return 2 end
redis.call('SREM', KEYS[2], ARGV[2])
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
`;
const REMOVE_SHA = createHash('sha1').update(REMOVE_SCRIPT).digest('hex');

/** The script's payload: every value a string. */
interface ApplyPayload {
  /** A creation or a rewrite: the job replaced whole. */
  whole?: boolean;
  /** A creation: earlier epoch summaries dropped too. */
  create?: boolean;
  jobId?: string;
  plan?: string;
  /** Done counts of the epochs whose hashes follow the counted epoch's key, in that order. */
  counts?: Record<string, string>[];
  /** Summaries of finished epochs, by epoch. */
  summaries?: Record<string, string>;
  job: Record<string, string>;
  /** Task fields: `<taskId>` for the current epoch, `next:<taskId>` for the next. */
  tasks: Record<string, string>;
  /** The next epoch's task fields go before `tasks` are written (an epoch ended). */
  dropNext?: boolean;
  counted?: string;
  /** Summaries of the epochs that ended, in order. */
  closed?: { epoch: string; value: string }[];
}

/** A stored lifecycle state; anything unknown reads as running, as jobs stored before states did. */
function lifecycle(state: string): QueueLifecycle {
  return state === 'stopped' || state === 'failed' ? state : 'running';
}

function fieldStrings(fields: Partial<QueueFields> & Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  }
  return out;
}

/** The prefix of the next epoch's task fields in a job's tasks hash. */
const NEXT_FIELD = 'next:';

/** Task fields of the current epoch's `tasks` and the next epoch's `next`. */
function taskStrings(tasks: readonly TaskState[], next: readonly TaskState[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const t of tasks) out[String(t.taskId)] = JSON.stringify(t);
  for (const t of next) out[`${NEXT_FIELD}${t.taskId}`] = JSON.stringify(t);
  return out;
}

/** The keys of a job's epoch hashes, from epoch 0 to the one after `epoch` (which may be open). */
function epochKeysThrough(k: JobKeys, epoch: number): string[] {
  return Array.from({ length: (Number.isInteger(epoch) && epoch >= 0 ? epoch : 0) + 2 }, (_, n) => k.epoch(n));
}

/**
 * The master's state in Redis, under a key prefix: `<prefix>:jobs` (set of job ids),
 * `<prefix>:job:<id>` (hash), `<prefix>:job:<id>:tasks` (hash taskId → task state, and
 * `next:<taskId>` → the next epoch's while it is open),
 * `<prefix>:job:<id>:plan`, `<prefix>:job:<id>:epochs` (finished epoch summaries) and
 * `<prefix>:job:<id>:epoch:<n>` (hash taskId → done count). Every write is one Lua script, so a
 * transition lands whole or not at all; with a fencing token, only while `<prefix>:leader` holds it.
 */
export class JobStore {
  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
    private readonly keptEpochs: number = KEPT_EPOCHS,
  ) {}

  /** The key holding the current leader's fencing token. */
  get leaderKey(): string {
    return `${this.prefix}:leader`;
  }

  /** The key of the set of all job ids. */
  get jobsKey(): string {
    return `${this.prefix}:jobs`;
  }

  /** The keys of one job. */
  keys(jobId: string): JobKeys {
    const job = `${this.prefix}:job:${jobId}`;
    return {
      job,
      tasks: `${job}:tasks`,
      plan: `${job}:plan`,
      epochs: `${job}:epochs`,
      epoch: (n) => `${job}:epoch:${n}`,
    };
  }

  /**
   * Writes a new job (replacing whatever an earlier job of the same id left) in one atomic step.
   * Resolves to the job's write count, which the next transition names.
   * @throws FencedWriteError when `fence` is given and is not the current leader token.
   */
  async create(job: StoredJob, fence?: string): Promise<number> {
    const k = this.keys(job.queue.jobId);
    const oldEpoch = await this.redis.hGet(k.job, 'epoch');
    const stale = oldEpoch === null || oldEpoch === undefined ? [] : epochKeysThrough(k, Number(oldEpoch));
    const payload = { ...wholeJob(job), create: true };
    return this.run(job.queue.jobId, k, k.epoch(job.queue.epoch), payload, fence, stale, ['', String(CREATED)]);
  }

  /**
   * Writes a job whole from the master's memory, over whatever Redis holds of it: its fields,
   * tasks and plan, and the done counts and summaries of the epochs the queue keeps (summaries
   * of older epochs stay). For a Redis that lost writes it had answered. Resolves to the job's
   * write count, `writes` + 1.
   * @throws FencedWriteError when `fence` is given and is not the current leader token.
   */
  async rewrite(job: StoredJob & { writes: number }, fence?: string): Promise<number> {
    const k = this.keys(job.queue.jobId);
    const kept = job.queue.epochs;
    const summaries: Record<string, string> = {};
    for (const e of kept) {
      if (e.epoch < job.queue.epoch)
        summaries[String(e.epoch)] = JSON.stringify({ done: e.done, discarded: e.discarded });
    }
    const payload: ApplyPayload = {
      ...wholeJob(job),
      counts: kept.map((e) => Object.fromEntries(Object.entries(e.doneCounts).map(([id, c]) => [id, String(c)]))),
      summaries,
    };
    const epochKeys = kept.map((e) => k.epoch(e.epoch));
    return this.run(job.queue.jobId, k, k.epoch(job.queue.epoch), payload, fence, epochKeys, [
      '',
      String(job.writes + 1),
    ]);
  }

  /**
   * Persists one task-queue transition atomically: job fields, changed tasks, the done count of
   * a counted task and the summary of a finished epoch. `writes`: the job's write count this
   * transition follows (unchecked when undefined). Resolves to the count after it.
   * @throws FencedWriteError when `fence` is given and is not the current leader token.
   * @throws LostWritesError when the job's write count in Redis is not `writes`.
   */
  async applyTransition(jobId: string, change: QueueChange, fence?: string, writes?: number): Promise<number> {
    const k = this.keys(jobId);
    const payload: ApplyPayload = { job: fieldStrings(change.job), tasks: taskStrings(change.tasks, change.next) };
    if (change.dropNext) payload.dropNext = true;
    if (change.counted) payload.counted = String(change.counted.taskId);
    if (change.closedEpochs?.length) {
      payload.closed = change.closedEpochs.map(({ epoch, done, discarded }) => ({
        epoch: String(epoch),
        value: JSON.stringify({ done, discarded }),
      }));
    }
    const counts: [string, string] = writes === undefined ? ['', ''] : [String(writes), String(writes + 1)];
    return this.run(jobId, k, k.epoch(change.counted?.epoch ?? 0), payload, fence, [], counts);
  }

  /**
   * Removes every key of run `runId` of a job (after its retention period) in one atomic step.
   * Resolves to false, removing nothing, when another run of the job id is stored (it was
   * submitted again); a job that is not stored is no error.
   * @throws FencedWriteError when `fence` is given and is not the current leader token.
   */
  async remove(jobId: string, runId: string, fence?: string): Promise<boolean> {
    const k = this.keys(jobId);
    const epochKeys = epochKeysThrough(k, Number((await this.redis.hGet(k.job, 'epoch')) ?? 0));
    const options = {
      keys: [this.leaderKey, this.jobsKey, k.job, k.tasks, k.plan, k.epochs, ...epochKeys],
      arguments: [fence ?? '', jobId, runId],
    };
    const reply = Number(await this.script(REMOVE_SCRIPT, REMOVE_SHA, options));
    if (reply === 0) throw new FencedWriteError(jobId, fence ?? '');
    return reply === 1;
  }

  /** The ids of every stored job. */
  async jobIds(): Promise<string[]> {
    return (await this.redis.sMembers(this.jobsKey)).sort();
  }

  /** A stored job's state and submission sequence, or undefined when there is no such job. */
  async submission(jobId: string): Promise<StoredSubmission | undefined> {
    const [state, seq] = await this.redis.hmGet(this.keys(jobId).job, ['state', 'submitSeq']);
    if (state === null || state === undefined) return undefined;
    return { state, submitSeq: Number(seq ?? 0) };
  }

  /**
   * Reads one job back.
   * @throws CorruptJobStateError when a field is missing or malformed.
   */
  async load(jobId: string): Promise<StoredJob | undefined> {
    const k = this.keys(jobId);
    const [fields, taskFields, planText, summaries] = await Promise.all([
      this.redis.hGetAll(k.job),
      this.redis.hGetAll(k.tasks),
      this.redis.get(k.plan),
      this.redis.hGetAll(k.epochs),
    ]);
    if (Object.keys(fields).length === 0) return undefined;
    try {
      const epoch = int(fields, 'epoch');
      const taskCount = int(fields, 'taskCount');
      const tasks = parseTasks(taskFields, taskCount, '');
      const nextOpen = Object.keys(taskFields).some((f) => f.startsWith(NEXT_FIELD));
      const next = nextOpen ? parseTasks(taskFields, taskCount, NEXT_FIELD) : undefined;
      const first = Math.max(0, epoch - this.keptEpochs + 1);
      const last = nextOpen ? epoch + 1 : epoch;
      const counts = await Promise.all(
        Array.from({ length: last - first + 1 }, (_, i) => this.redis.hGetAll(k.epoch(first + i))),
      );
      const epochs: EpochAccounting[] = counts.map((raw, i) => {
        const n = first + i;
        const summary = summaries[String(n)]
          ? (JSON.parse(summaries[String(n)]!) as { done: number; discarded: number })
          : undefined;
        const doneCounts: Record<string, number> = {};
        for (const [taskId, c] of Object.entries(raw)) doneCounts[taskId] = Number(c);
        return { epoch: n, done: summary?.done ?? 0, discarded: summary?.discarded ?? 0, doneCounts };
      });
      if (planText === null || planText === undefined) throw new Error('the task plan is missing');
      const queue: QueueSnapshot = {
        jobId,
        runId: str(fields, 'runId'),
        state: lifecycle(str(fields, 'state')),
        epoch,
        startedAt: int(fields, 'startedAt'),
        samples: Number(fields['samples'] ?? 0),
        dispatchSeq: int(fields, 'dispatchSeq'),
        durationsMs: JSON.parse(fields['durationsMs'] ?? '[]') as number[],
        tasks,
        epochs,
      };
      if (next !== undefined) queue.next = next;
      if (fields['reason']) queue.reason = fields['reason'] as StopReason;
      if (fields['detail'] !== undefined) queue.detail = fields['detail'];
      if (fields['stoppedAt'] !== undefined) queue.stoppedAt = int(fields, 'stoppedAt');
      if (fields['faults'] !== undefined) queue.faults = int(fields, 'faults');
      return {
        spec: JSON.parse(str(fields, 'spec')) as JobSpec,
        plan: JSON.parse(planText) as PlannedTask[],
        submitSeq: Number(fields['submitSeq'] ?? 0),
        queue,
        writes: fields['writes'] === undefined ? 0 : int(fields, 'writes'),
        writer: fields['writer'] ?? '',
      };
    } catch (cause) {
      throw new CorruptJobStateError(jobId, (cause as Error).message, { cause });
    }
  }

  /**
   * Reads every stored job back, so a restarted master resumes where it was. A job whose state
   * cannot be read is reported in `errors` and left out; the others still load.
   */
  async loadAll(): Promise<{ jobs: StoredJob[]; errors: CorruptJobStateError[] }> {
    const jobs: StoredJob[] = [];
    const errors: CorruptJobStateError[] = [];
    for (const jobId of await this.jobIds()) {
      try {
        const job = await this.load(jobId);
        if (job) jobs.push(job);
      } catch (err) {
        if (!(err instanceof CorruptJobStateError)) throw err;
        errors.push(err);
      }
    }
    return { jobs, errors };
  }

  private async run(
    jobId: string,
    k: JobKeys,
    countedEpochKey: string,
    payload: ApplyPayload,
    fence: string | undefined,
    extraKeys: string[],
    [expected, next]: [string, string],
  ): Promise<number> {
    const options = {
      keys: [this.leaderKey, this.jobsKey, k.job, k.tasks, k.epochs, k.plan, countedEpochKey, ...extraKeys],
      arguments: [fence ?? '', JSON.stringify(payload), expected, next],
    };
    const reply = await this.script(APPLY_SCRIPT, APPLY_SHA, options);
    if (Array.isArray(reply)) throw new LostWritesError(jobId, Number(expected), Number(reply[1]));
    if (Number(reply) === 0) throw new FencedWriteError(jobId, fence ?? '');
    return Number(reply);
  }

  /** Runs a script by its digest, loading it first when Redis does not have it. */
  private async script(source: string, sha: string, options: { keys: string[]; arguments: string[] }) {
    try {
      return await this.redis.evalSha(sha, options);
    } catch (err) {
      if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err;
      return this.redis.eval(source, options);
    }
  }
}

/** A job's write count right after its creation. */
const CREATED = 1;

/** The parts of a whole write that a creation and a rewrite share: job fields, tasks, plan. */
function wholeJob(job: StoredJob): ApplyPayload {
  const { tasks, next, epochs: _epochs, ...fields } = job.queue;
  return {
    whole: true,
    jobId: job.queue.jobId,
    plan: JSON.stringify(job.plan),
    job: fieldStrings({ ...fields, spec: JSON.stringify(job.spec), submitSeq: job.submitSeq, taskCount: tasks.length }),
    tasks: taskStrings(tasks, next),
  };
}

/** One epoch's task states from a job's tasks hash, its fields named `<prefix><taskId>`. */
function parseTasks(fields: Record<string, string>, taskCount: number, prefix: string): TaskState[] {
  return Array.from({ length: taskCount }, (_, taskId) => {
    const raw = fields[`${prefix}${taskId}`];
    if (raw === undefined) throw new Error(`task ${taskId}${prefix === '' ? '' : ' of the next epoch'} is missing`);
    return JSON.parse(raw) as TaskState;
  });
}

function str(fields: Record<string, string>, name: string): string {
  const v = fields[name];
  if (v === undefined) throw new Error(`field ${name} is missing`);
  return v;
}

function int(fields: Record<string, string>, name: string): number {
  const v = Number(str(fields, name));
  if (!Number.isInteger(v)) throw new Error(`field ${name} is not an integer: ${JSON.stringify(fields[name])}`);
  return v;
}
