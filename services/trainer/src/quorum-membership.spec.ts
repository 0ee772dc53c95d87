import { QuorumMembership, type QuorumClient } from './quorum-membership.js';

/** Records the calls in order; each join waits for `release` while `hold` is set. */
class FakeQuorum implements QuorumClient {
  readonly calls: string[] = [];
  hold: Promise<void> | undefined;

  async join() {
    this.calls.push('join');
    if (this.hold) await this.hold;
    return { versions: [0], countedFrom: [1] };
  }

  async leave() {
    this.calls.push('leave');
  }
}

async function eventually(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
}

describe('quorum membership', () => {
  it('quorum membership - joins again on every heartbeat while joined, and not after leaving', async () => {
    const client = new FakeQuorum();
    const membership = new QuorumMembership(client, { heartbeatMs: 10 });
    await membership.join();
    expect(membership.isJoined).toBe(true);
    await eventually(() => client.calls.length >= 3);
    await membership.leave();
    expect(membership.isJoined).toBe(false);
    const after = client.calls.length;
    await new Promise((r) => setTimeout(r, 50));
    expect(client.calls.slice(after - 1)).toEqual(['leave']);
    expect(client.calls.slice(0, after - 1).every((c) => c === 'join')).toBe(true);
  });

  it('quorum membership - a leave waits for the heartbeat in flight, so it is never undone by it', async () => {
    const client = new FakeQuorum();
    const membership = new QuorumMembership(client, { heartbeatMs: 5 });
    await membership.join();
    let release!: () => void;
    client.hold = new Promise<void>((r) => (release = r));
    await eventually(() => client.calls.length === 2);
    const leaving = membership.leave();
    await new Promise((r) => setTimeout(r, 20));
    expect(client.calls).toEqual(['join', 'join']);
    release();
    await leaving;
    expect(client.calls).toEqual(['join', 'join', 'leave']);
  });

  it('quorum membership - refresh joins again only while joined; leave without a join does nothing', async () => {
    const client = new FakeQuorum();
    const membership = new QuorumMembership(client, { heartbeatMs: 60_000 });
    await membership.refresh();
    await membership.leave();
    expect(client.calls).toEqual([]);
    await membership.join();
    await membership.refresh();
    await membership.leave();
    expect(client.calls).toEqual(['join', 'join', 'leave']);
  });
});
