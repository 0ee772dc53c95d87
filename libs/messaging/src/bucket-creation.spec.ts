import { JetStreamApiError } from '@nats-io/jetstream';
import { onceMoreIfCreatedMeanwhile } from './streams.js';

/** The server's refusal of a stream's creation, as nats.js throws it. */
function refusal(errCode: number, description: string): JetStreamApiError {
  return new JetStreamApiError({ code: 400, err_code: errCode, description });
}

/** How many times a creation that always throws `error` is tried before `error` comes out as it was. */
async function triesBeforeThrowing(error: Error): Promise<number> {
  let calls = 0;
  await expect(
    onceMoreIfCreatedMeanwhile(async () => {
      calls += 1;
      throw error;
    }),
  ).rejects.toBe(error);
  return calls;
}

describe('bucket creation', () => {
  it('bucket creation - another process creating the same bucket at the same moment: the second try opens it', async () => {
    for (const raced of [
      refusal(10065, 'subjects overlap with an existing stream'),
      refusal(10058, 'stream name already in use with a different configuration'),
    ]) {
      let calls = 0;
      const opened = await onceMoreIfCreatedMeanwhile(async () => {
        calls += 1;
        if (calls === 1) throw raced;
        return 'bucket';
      });
      expect(opened).toBe('bucket');
      expect(calls).toBe(2);
    }
  });

  it('bucket creation - any other refusal, or the same one twice, is thrown as it came', async () => {
    const other = refusal(10047, 'insufficient storage resources available');
    await expect(triesBeforeThrowing(other)).resolves.toBe(1);
    const plain = new Error('connection closed');
    await expect(triesBeforeThrowing(plain)).resolves.toBe(1);
    await expect(triesBeforeThrowing(refusal(10065, 'subjects overlap with an existing stream'))).resolves.toBe(2);
  });
});
