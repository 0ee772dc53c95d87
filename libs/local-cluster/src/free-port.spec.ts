import { freePort } from './server-processes.js';

describe('free ports', () => {
  it('free port - never hands out the same port twice in a process', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 200; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) expect(port).toBeGreaterThan(0);
  });
});
