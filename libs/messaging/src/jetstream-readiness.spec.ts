import { whileJetStreamSettles, isJetStreamSettling } from './jetstream-readiness.js';

/** What nats.js throws when no server answers JetStream's API yet. */
function notEnabled(): Error {
  return Object.assign(new Error('jetstream is not enabled'), { name: 'JetStreamNotEnabled' });
}

describe('whileJetStreamSettles', () => {
  it('declares again while JetStream is settling, then returns what the declaration returned', async () => {
    let calls = 0;
    const result = await whileJetStreamSettles(async () => {
      calls += 1;
      if (calls < 3) throw notEnabled();
      return 'declared';
    }, 10_000);
    expect(result).toBe('declared');
    expect(calls).toBe(3);
  });

  it('gives up on an error of another kind at once, and on a settling one when the time is spent', async () => {
    let calls = 0;
    const refused = new Error('stream name already in use with a different configuration');
    await expect(
      whileJetStreamSettles(async () => {
        calls += 1;
        throw refused;
      }, 10_000),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);
    await expect(
      whileJetStreamSettles(async () => {
        throw notEnabled();
      }, 300),
    ).rejects.toThrow('jetstream is not enabled');
  });

  it('tells settling errors from refusals', () => {
    expect(isJetStreamSettling(notEnabled())).toBe(true);
    expect(isJetStreamSettling(new Error('permissions violation'))).toBe(false);
    expect(isJetStreamSettling('not an error')).toBe(false);
  });
});
