/** Small file helpers of the message log. */

import { constants as fsConstants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { TickwheelUnavailableError } from '../../errors.js';

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
 * Writes all of `buffer` at `position` (a write may take only part of it); a write that makes
 * no progress fails rather than being tried again for ever.
 */
export async function writeFully(
  handle: FileHandle,
  buffer: Buffer,
  position: number,
): Promise<void> {
  let done = 0;
  while (done < buffer.length) {
    const { bytesWritten } = await handle.write(
      buffer,
      done,
      buffer.length - done,
      position + done,
    );
    if (!(bytesWritten > 0)) {
      throw new TickwheelUnavailableError(
        'ERR_TICKWHEEL_IO',
        `write made no progress (${String(bytesWritten)} bytes)`,
      );
    }
    done += bytesWritten;
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
