import { INIT_FIRST_POLL_MS, INIT_POLL_MS, initPollPause } from './init-election.js';

describe('init election', () => {
  it('init election - a trainer waiting for the parameters asks again after pauses that double up to the poll period', () => {
    const pauses = Array.from({ length: 8 }, (_, ask) => initPollPause(ask));
    expect(INIT_FIRST_POLL_MS).toBe(20);
    expect(pauses).toEqual([20, 40, 80, 160, INIT_POLL_MS, INIT_POLL_MS, INIT_POLL_MS, INIT_POLL_MS]);
    // A shorter period given (as tests do) caps the pauses at once; a thousandth ask stays finite.
    expect([0, 1, 2].map((ask) => initPollPause(ask, 30))).toEqual([20, 30, 30]);
    expect(initPollPause(1000)).toBe(INIT_POLL_MS);
  });
});
