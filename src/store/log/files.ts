/** Small file helpers of the message log. */

import { constants as fsConstants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { TickwheelUnavailableError } from '../../errors.js';
import { defaultIo, type LogIo } from './options.js';

export const CREATE_FLAGS = fsConstants.O_RDWR | fsConstants.O_CREAT;

/**
 * Modes of what tickwheel creates in a data directory: its owner's alone. The log holds users'
 * payloads and push.json targets' secrets; anyone else reads them through the queue, not the
 * files. (The umask can only take bits away, so these hold whatever it is.)
 */
export const DATA_FILE_MODE = 0o600;
export const DATA_DIRECTORY_MODE = 0o700;

export function ignore(): void {}

/** What `operation` resolves to, or undefined if the file it works on is not there (ENOENT). */
export async function ifExists<T>(operation: Promise<T>): Promise<T | undefined> {
  try {
    return await operation;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Reads until `length` bytes or the end of the file; returns how many were read. */
export async function readFully(
  handle: FileHandle,
  buffer: Buffer,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(buffer, offset + done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

/**
 * Writes `buffer[from, to)` at `position + from` (a write may take only part of it), each write
 * counted in `counts`; a write that makes no progress fails rather than being tried again for ever.
 */
export async function writeFully(
  handle: FileHandle,
  buffer: Buffer,
  position: number,
  from = 0,
  to = buffer.length,
  io: Pick<LogIo, 'write'> = defaultIo,
  counts = { writes: 0 },
): Promise<void> {
  while (from < to) {
    const written = await io.write(handle, buffer, from, to - from, position + from);
    counts.writes++;
    if (!(written > 0)) {
      throw new TickwheelUnavailableError(
        'ERR_TICKWHEEL_IO',
        `write made no progress (${String(written)} bytes)`,
      );
    }
    from += written;
  }
}

export function closeQuietly(handle: Promise<FileHandle>): void {
  handle.then((h) => h.close()).catch(ignore);
}

export async function syncDirectory(path: string): Promise<void> {
  // Windows cannot open a directory to fsync it; NTFS journals the entry itself.
  if (process.platform === 'win32') return;
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
