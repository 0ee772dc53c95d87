import type { KV } from '@nats-io/kv';
import type { MemberStatus } from '#libs/messaging';
import { MemberBeacon } from './member-beacon.js';

/** A members bucket that keeps what was put under each key. */
function recordingBucket(): { kv: KV; entries: Map<string, MemberStatus> } {
  const entries = new Map<string, MemberStatus>();
  const kv = {
    put: (key: string, data: Uint8Array) => {
      entries.set(key, JSON.parse(new TextDecoder().decode(data)) as MemberStatus);
      return Promise.resolve(1);
    },
    delete: (key: string) => {
      entries.delete(key);
      return Promise.resolve();
    },
  } as unknown as KV;
  return { kv, entries };
}

const BASE = { role: 'trainer', id: 'trainer-1', pid: 4242, host: 'h' } as const;

describe('member beacon', () => {
  it('member beacon - says which CPUs the process may run on, read again at each periodic refresh', async () => {
    const { kv, entries } = recordingBucket();
    let cpus = [0, 1, 2, 3];
    let reads = 0;
    const beacon = new MemberBeacon(kv, BASE, () => {
      reads += 1;
      return cpus;
    });
    beacon.start();
    expect(entries.get('trainer.trainer-1')).toMatchObject({ role: 'trainer', state: 'idle', cpus: '0-3' });
    // Updates come with every task: they publish the CPUs last read, without reading them again.
    cpus = [2];
    beacon.update({ state: 'training', jobId: 'j' });
    expect(reads).toBe(1);
    expect(entries.get('trainer.trainer-1')).toMatchObject({ state: 'training', jobId: 'j', cpus: '0-3' });
    (beacon as unknown as { refresh(): void }).refresh();
    expect(entries.get('trainer.trainer-1')).toMatchObject({ state: 'training', cpus: '2' });
    await beacon.stop();
    expect(entries.size).toBe(0);
  });

  it('member beacon - leaves the CPUs out where the system does not say, or says something else', async () => {
    const { kv, entries } = recordingBucket();
    const unknown = new MemberBeacon(kv, BASE, () => ({ unknown: '/proc/self/status cannot be read' }));
    unknown.start();
    expect(entries.get('trainer.trainer-1')).not.toHaveProperty('cpus');
    await unknown.stop();
    const garbled = new MemberBeacon(kv, { ...BASE, id: 'trainer-2' }, () => {
      throw new RangeError('"x" is not a CPU list (such as 0-3,8)');
    });
    garbled.start();
    expect(entries.get('trainer.trainer-2')).toMatchObject({ state: 'idle' });
    expect(entries.get('trainer.trainer-2')).not.toHaveProperty('cpus');
    await garbled.stop();
  });
});
