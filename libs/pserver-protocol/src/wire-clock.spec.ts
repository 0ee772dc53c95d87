import { WireClock } from './wire-clock.js';

describe('wire clock', () => {
  it('wire clock - counts encoding and decoding apart, nested work once, and work that throws', () => {
    let now = 0;
    const clock = new WireClock(() => now);
    clock.encoding(() => (now += 2));
    clock.decoding(() => {
      now += 1;
      // A conversion timed inside a message's decoding is part of it, not counted again.
      clock.decoding(() => (now += 3));
      clock.encoding(() => (now += 1));
    });
    expect(() =>
      clock.encoding(() => {
        now += 4;
        throw new Error('malformed');
      }),
    ).toThrow('malformed');
    expect(clock.read()).toEqual({ encodeMs: 6, decodeMs: 5 });
  });
});
