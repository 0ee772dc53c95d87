import { Logger } from '@nestjs/common';
import { JsonLogger } from './json-logger.js';

/** Runs `fn` with stdout and stderr captured; returns what each received. */
function capture(fn: () => void): { stdout: string; stderr: string } {
  const out = { stdout: '', stderr: '' };
  const writes = { stdout: process.stdout.write, stderr: process.stderr.write };
  process.stdout.write = ((chunk: string) => ((out.stdout += chunk), true)) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string) => ((out.stderr += chunk), true)) as typeof process.stderr.write;
  try {
    fn();
  } finally {
    process.stdout.write = writes.stdout;
    process.stderr.write = writes.stderr;
  }
  return out;
}

function lines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('json logger', () => {
  const source = { service: 'trainer', id: 'trainer-h-1-ab12' };

  afterEach(() => Logger.overrideLogger(['log', 'warn', 'error']));

  test('json logger - one JSON object per line with time, level, service, id, context and message', () => {
    const logger = new JsonLogger(source, ['log', 'warn', 'error']);
    const { stdout } = capture(() => {
      logger.log('ready: 2 trainers', 'Trainer');
      logger.warn('NATS disconnected\nreconnecting', 'Connections');
    });
    const [first, second, ...rest] = lines(stdout);
    expect(rest).toHaveLength(0);
    expect(first).toMatchObject({
      level: 'log',
      service: 'trainer',
      id: source.id,
      context: 'Trainer',
      message: 'ready: 2 trainers',
    });
    expect(new Date(first.time as string).toISOString()).toBe(first.time);
    expect(first.pid).toBe(process.pid);
    expect(second).toMatchObject({ level: 'warn', context: 'Connections', message: 'NATS disconnected\nreconnecting' });
  });

  test('json logger - an error logs on stderr with its error fields, and levels below the threshold are dropped', () => {
    const logger = new JsonLogger(source, ['warn', 'error']);
    const cause = new Error('connection refused');
    const { stdout, stderr } = capture(() => {
      logger.log('not shown', 'Pserver');
      logger.error(new Error('push failed', { cause }), 'Pserver');
      logger.error('shutdown failed', 'at stop (bootstrap.ts:1:1)', 'Bootstrap');
    });
    expect(stdout).toBe('');
    const [withError, withStack] = lines(stderr);
    expect(withError).toMatchObject({ level: 'error', context: 'Pserver', message: 'push failed' });
    expect(withError.error).toMatchObject({
      name: 'Error',
      message: 'push failed',
      cause: { message: 'connection refused' },
    });
    expect(withStack).toMatchObject({
      level: 'error',
      context: 'Bootstrap',
      message: 'shutdown failed',
      stack: 'at stop (bootstrap.ts:1:1)',
    });
  });

  test('json logger - a Nest Logger writes through it once it is the application logger', () => {
    Logger.overrideLogger(new JsonLogger(source, ['log', 'warn', 'error']));
    const { stdout } = capture(() => new Logger('Master').log('leader now'));
    expect(lines(stdout)).toEqual([
      expect.objectContaining({ context: 'Master', message: 'leader now', service: 'trainer' }),
    ]);
  });
});
