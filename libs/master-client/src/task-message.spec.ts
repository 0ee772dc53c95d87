import fc from 'fast-check';
import { MalformedMessageError, encodeJson, type TaskMessage } from '#libs/messaging';
import { parseTaskMessage } from './task-message.js';

const SUBJECT = 'tributary.tasks.j1';

const taskArb: fc.Arbitrary<TaskMessage> = fc.record({
  jobId: fc.stringMatching(/^[a-z0-9][a-z0-9_-]{0,10}$/),
  epoch: fc.nat(),
  taskId: fc.nat(),
  dispatchId: fc.string({ minLength: 1 }),
  chunks: fc.array(fc.record({ file: fc.string({ minLength: 1 }), offset: fc.nat(), numRecords: fc.nat() })),
});

describe('task message', () => {
  it('task message - a valid message round trips', () => {
    fc.assert(fc.property(taskArb, (task) => expect(parseTaskMessage(SUBJECT, encodeJson(task))).toEqual(task)));
  });

  it('task message - arbitrary bytes are refused only with MalformedMessageError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          parseTaskMessage(SUBJECT, bytes);
        } catch (err) {
          expect(err).toBeInstanceOf(MalformedMessageError);
        }
      }),
    );
  });

  it('task message - a missing or mistyped field is named', () => {
    const good = {
      jobId: 'j1',
      epoch: 0,
      taskId: 3,
      dispatchId: 'd',
      chunks: [{ file: 'a', offset: 0, numRecords: 2 }],
    };
    expect(() => parseTaskMessage(SUBJECT, encodeJson({ ...good, dispatchId: undefined }))).toThrow(/dispatchId/);
    expect(() => parseTaskMessage(SUBJECT, encodeJson({ ...good, taskId: -1 }))).toThrow(/taskId/);
    expect(() =>
      parseTaskMessage(SUBJECT, encodeJson({ ...good, chunks: [{ file: 'a', offset: 'x', numRecords: 1 }] })),
    ).toThrow(/chunks\[0\]\.offset|offset/);
    expect(() => parseTaskMessage(SUBJECT, new TextEncoder().encode('not json'))).toThrow(/not JSON/);
  });
});
