import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  InvalidGradientError,
  PserverError,
  PserverTimeoutError,
  PserverUnavailableError,
  ShardAddressTimeoutError,
  ShardCallError,
} from '#libs/pserver-client';
import { PserverOutageError } from './errors.js';
import { PserverOutage, failedShards, isTransientPserverFailure } from './pserver-outage.js';

describe('pserver outage', () => {
  it('pserver outage - unreachable, closing, loading and unregistered shards pass by themselves; bad input does not', () => {
    const unavailable = new PserverUnavailableError('down', 1, GrpcStatus.UNAVAILABLE, '');
    const closing = new PserverUnavailableError('closing', 0, GrpcStatus.UNAVAILABLE, 'closing');
    const deadline = new PserverTimeoutError('slow', 0, GrpcStatus.DEADLINE_EXCEEDED, '');
    const noAddress = new PserverError('no address', 0, GrpcStatus.UNKNOWN, '', {
      cause: new ShardAddressTimeoutError(0, 10),
    });
    const invalid = new InvalidGradientError('shape', 0, GrpcStatus.INVALID_ARGUMENT, 'invalid-tensor');
    const unknownJob = new PserverError('unknown job', 0, GrpcStatus.NOT_FOUND, 'unknown-job');
    expect(isTransientPserverFailure(new ShardCallError('push', [undefined, unavailable]))).toBe(true);
    expect(isTransientPserverFailure(new ShardCallError('push', [closing, deadline]))).toBe(true);
    expect(isTransientPserverFailure(new ShardCallError('pull', [noAddress]))).toBe(true);
    expect(isTransientPserverFailure(new ShardCallError('push', [unavailable, invalid]))).toBe(false);
    expect(isTransientPserverFailure(new ShardCallError('pull', [unknownJob]))).toBe(false);
    expect(isTransientPserverFailure(new Error('other'))).toBe(false);
    expect([...failedShards(new ShardCallError('push', [undefined, unavailable]))]).toEqual([1]);
  });

  it('pserver outage - pauses double up to the max, never past the budget, which ends the outage', () => {
    let now = 0;
    const outage = new PserverOutage({ budgetMs: 1_000, initialBackoffMs: 100, maxBackoffMs: 300, now: () => now });
    const err = new Error('down');
    expect(outage.active).toBe(false);
    expect(outage.failed(err)).toBe(100);
    expect(outage.active).toBe(true);
    now = 100;
    expect(outage.failed(err)).toBe(200);
    now = 300;
    expect(outage.failed(err)).toBe(300);
    now = 900;
    expect(outage.failed(err)).toBe(100);
    now = 1_000;
    expect(() => outage.failed(err)).toThrow(PserverOutageError);
  });

  it('pserver outage - a call that goes through ends the outage and resets the pauses', () => {
    let now = 0;
    const outage = new PserverOutage({ budgetMs: 1_000, initialBackoffMs: 100, now: () => now });
    outage.failed(new Error('down'));
    outage.failed(new Error('down'));
    expect(outage.recovered()).toBe(true);
    expect(outage.recovered()).toBe(false);
    now = 5_000;
    expect(outage.failed(new Error('down'))).toBe(100);
  });
});
