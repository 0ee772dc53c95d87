import { MalformedMessageError, decodeJsonObject, numberField, stringField, type TaskMessage } from '#libs/messaging';

/**
 * Decodes a task message pulled from the tasks stream, checking every field the trainer relies
 * on; anything else is a `MalformedMessageError` naming the subject and the field.
 */
export function parseTaskMessage(subject: string, data: Uint8Array): TaskMessage {
  const obj = decodeJsonObject(subject, data);
  const jobId = stringField(subject, obj, 'jobId');
  const epoch = numberField(subject, obj, 'epoch');
  const taskId = numberField(subject, obj, 'taskId');
  const dispatchId = stringField(subject, obj, 'dispatchId');
  if (!Number.isInteger(epoch) || epoch < 0)
    throw new MalformedMessageError(subject, `epoch: expected a non-negative integer`);
  if (!Number.isInteger(taskId) || taskId < 0)
    throw new MalformedMessageError(subject, `taskId: expected a non-negative integer`);
  const rawChunks = obj['chunks'];
  if (!Array.isArray(rawChunks)) throw new MalformedMessageError(subject, 'chunks: expected an array');
  const chunks = rawChunks.map((c: unknown, i) => {
    if (c === null || typeof c !== 'object' || Array.isArray(c)) {
      throw new MalformedMessageError(subject, `chunks[${i}]: expected an object`);
    }
    const chunk = c as Record<string, unknown>;
    const file = stringField(subject, chunk, 'file');
    const offset = numberField(subject, chunk, 'offset');
    const numRecords = numberField(subject, chunk, 'numRecords');
    if (!Number.isInteger(offset) || offset < 0) {
      throw new MalformedMessageError(subject, `chunks[${i}].offset: expected a non-negative integer`);
    }
    if (!Number.isInteger(numRecords) || numRecords < 0) {
      throw new MalformedMessageError(subject, `chunks[${i}].numRecords: expected a non-negative integer`);
    }
    return { file, offset, numRecords };
  });
  return { jobId, epoch, taskId, dispatchId, chunks };
}
