import { ThroughputMeter } from './throughput.js';

/** A meter over a 10 s window on a clock the test moves. */
function meter(): { meter: ThroughputMeter; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { meter: new ThroughputMeter(10_000, () => now), advance: (ms) => (now += ms) };
}

describe('throughput meter', () => {
  it('throughput - a steady rate is measured over the window', () => {
    const { meter: m, advance } = meter();
    // 64 samples every 2 ms (32,000 samples/s) for 30 s.
    for (let t = 0; t < 15_000; t++) {
      m.add(64);
      advance(2);
    }
    expect(m.rate()).toBeGreaterThan(31_500);
    expect(m.rate()).toBeLessThan(32_500);
  });

  it('throughput - a trainer that started recently is measured from its first samples, over 1 s at least', () => {
    const { meter: m, advance } = meter();
    m.add(100);
    expect(m.rate()).toBe(100);
    advance(3_000);
    m.add(200);
    expect(m.rate()).toBe(100);
  });

  it('throughput - samples older than the window no longer count, and an idle window reads 0', () => {
    const { meter: m, advance } = meter();
    m.add(1_000);
    advance(9_000);
    m.add(500);
    advance(2_000);
    // Only the 500 remain, counted from when they came (2 s ago).
    expect(m.rate()).toBe(250);
    advance(10_000);
    expect(m.rate()).toBe(0);
  });
});
