/**
 * Staged records are written synchronously when the process exits through process.exit() or an
 * uncaught exception, so that a handler that ends the process (a poison message) does not take
 * them along. Not fsynced; a SIGKILL or a native crash runs no code and loses them.
 */

import { closeSync, openSync, writeSync } from 'node:fs';
import { CREATE_FLAGS, DATA_FILE_MODE } from './files.js';

/** A log writer that can write what it has staged, synchronously. */
export interface StagedWrites {
  writeStagedSync(): void;
}

const writers = new Set<StagedWrites>();
let listening = false;

function writeAll(): void {
  for (const writer of writers) {
    try {
      writer.writeStagedSync();
    } catch {
      // The process is going down: what cannot be written is lost as a crash would lose it.
    }
  }
}

/** Has `writer`'s staged records written if the process exits (until forgotten). */
export function writeAtExit(writer: StagedWrites): void {
  if (!listening) {
    listening = true;
    process.on('exit', writeAll);
    // Runs before an uncaught exception ends the process, changing nothing about its handling.
    process.on('uncaughtExceptionMonitor', writeAll);
  }
  writers.add(writer);
}

export function forgetAtExit(writer: StagedWrites): void {
  writers.delete(writer);
}

/** Writes `buf[from, to)` at `fileOffset + from` of the file open as `fd`, or of `path`. */
export function writeRangeSync(
  fd: number | undefined,
  path: string,
  buf: Buffer,
  from: number,
  to: number,
  fileOffset: number,
): void {
  const file = fd ?? openSync(path, CREATE_FLAGS, DATA_FILE_MODE);
  try {
    while (from < to) {
      const written = writeSync(file, buf, from, to - from, fileOffset + from);
      if (!(written > 0)) return;
      from += written;
    }
  } finally {
    if (fd === undefined) closeSync(file);
  }
}
