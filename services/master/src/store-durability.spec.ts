import { durabilityWarning } from './store-durability.js';

describe('durabilityWarning', () => {
  test('an append-only file fsynced per write keeps every answered write', () => {
    expect(durabilityWarning({ appendonly: 'yes', appendfsync: 'always' })).toBeUndefined();
  });

  test('fsync once a second may lose answered writes', () => {
    expect(durabilityWarning({ appendonly: 'yes', appendfsync: 'everysec' })).toMatch(
      /once a second.*may lose writes it already answered/,
    );
  });

  test('fsync left to the OS is named as set', () => {
    expect(durabilityWarning({ appendonly: 'yes', appendfsync: 'no' })).toMatch(/per "no"/);
  });

  test('no append-only file loses the jobs on a restart', () => {
    expect(durabilityWarning({ appendonly: 'no', appendfsync: 'always' })).toMatch(/no append-only file/);
    expect(durabilityWarning({})).toMatch(/no append-only file/);
  });
});
