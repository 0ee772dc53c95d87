import type { StatusReply } from '#libs/pserver-client';

/** A one-shard status reply as a fake parameter service gives it: one job `j` at `version`. */
export function oneShardStatus(version: number, mode: string): StatusReply[] {
  const job = { jobId: 'j', version, members: [], initialized: true, pendingPushes: 0, mode, tensors: 1 };
  return [{ shard: 0, jobs: [job] }];
}
