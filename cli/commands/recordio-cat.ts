import { createHash } from 'node:crypto';
import type { Command } from 'commander';
import { expandPatterns, scanRecords } from '#libs/recordio';
import { type CliIo, OutputStream } from '../cli-io.js';
import { commandGroup } from '../command-group.js';

/** Lines are gathered up to about this many characters before each write to stdout. */
const CAT_WRITE_BATCH_CHARS = 64 * 1024;

function hex(record: Uint8Array): string {
  return Buffer.from(record.buffer, record.byteOffset, record.byteLength).toString('hex');
}

function sha256(record: Uint8Array): string {
  return createHash('sha256').update(record).digest('hex');
}

/** Registers `tributary recordio cat FILE... [--sha256]`. */
export function register(program: Command, io: CliIo): void {
  commandGroup(program, 'recordio', 'look into RecordIO files')
    .command('cat')
    .description('print every record, one a line, as hex (or its SHA-256 with --sha256)')
    .argument('<files...>', 'RecordIO files or glob patterns')
    .option('--sha256', "print each record's SHA-256 instead of its bytes")
    .action(async (patterns: string[], flags: { sha256?: boolean }) => {
      const format = flags.sha256 === true ? sha256 : hex;
      const files = await expandPatterns(patterns);
      const out = new OutputStream(io.stdout);
      try {
        let batch = '';
        for (const file of files) {
          for await (const record of scanRecords(file)) {
            batch += format(record) + '\n';
            if (batch.length >= CAT_WRITE_BATCH_CHARS) {
              // The reader went away (`| head`): stop quietly, closing the file on the way out.
              if (!(await out.write(batch))) return;
              batch = '';
            }
          }
        }
        if (batch.length > 0) await out.write(batch);
      } finally {
        out.release();
      }
    });
}
