/** The message log's options, their defaults and limits, and the file operations it uses. */

import type { FileHandle } from 'node:fs/promises';
import { LogError } from './errors.js';

export type FsyncPolicy = 'always' | 'batch' | 'never';

/**
 * The file operations the writer uses.
 * @internal Tests replace them to slow the disk down or make it fail.
 */
export interface LogIo {
  write(
    handle: FileHandle,
    buffer: Buffer,
    offset: number,
    length: number,
    position: number,
  ): Promise<number>;
  /** Makes everything written to the handle durable (fdatasync). */
  sync(handle: FileHandle): Promise<void>;
}

export interface MessageLogOptions {
  /** The log's own folder, created if missing. Segment files live here. */
  dir: string;
  /** What `durable` waits for; see writer.ts. Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Start a new segment when the next record would pass this size. Default 64 MiB; max 2 GiB. */
  segmentBytes?: number;
  /** Largest body `append` accepts. Default 16 MiB; max 1 GiB. */
  maxRecordBytes?: number;
  /** @internal Test hook: replaces the writer's file operations. */
  io?: Partial<LogIo>;
  /**
   * Called before the writer creates a new segment file (a roll). A rejection fails that write
   * as an I/O error would, keeping the code of a TickwheelUnavailableError: the file store checks
   * here that the directory is still its own.
   */
  beforeNewSegment?: () => Promise<void>;
}

/** Defaults and bounds: segmentBytes + header + maxRecordBytes < 2^32, so offsets fit positions. */
const SIZES = {
  segmentBytes: { fallback: 64 * 1024 * 1024, min: 1, max: 2 ** 31 },
  maxRecordBytes: { fallback: 16 * 1024 * 1024, min: 0, max: 2 ** 30 },
};

export const defaultIo: LogIo = {
  async write(handle, buffer, offset, length, position) {
    const { bytesWritten } = await handle.write(buffer, offset, length, position);
    return bytesWritten;
  },
  sync: (handle) => handle.datasync(),
};

export type LogSettings = ReturnType<typeof readOptions>;

export function readOptions(options: MessageLogOptions) {
  if (typeof options !== 'object' || options === null) {
    throw invalidOption('options must be an object such as { dir: "data/log" }');
  }
  if (typeof options.dir !== 'string' || options.dir.length === 0) {
    throw invalidOption('dir must be the path of the folder for the log segments');
  }
  const fsync = options.fsync ?? 'batch';
  if (fsync !== 'batch' && fsync !== 'always' && fsync !== 'never') {
    throw invalidOption(`fsync must be 'batch', 'always' or 'never', got ${String(fsync)}`);
  }
  return {
    dir: options.dir,
    fsync,
    segmentBytes: sizeOption(options, 'segmentBytes'),
    maxRecordBytes: sizeOption(options, 'maxRecordBytes'),
    io: { ...defaultIo, ...options.io },
    beforeNewSegment: options.beforeNewSegment,
  };
}

function sizeOption(options: MessageLogOptions, name: keyof typeof SIZES): number {
  const value = options[name];
  const { fallback, min, max } = SIZES[name];
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidOption(
      `${name} must be an integer from ${min} to ${max} bytes, got ${String(value)}`,
    );
  }
  return value;
}

function invalidOption(message: string): LogError {
  return new LogError('ERR_TICKWHEEL_INVALID_OPTION', message);
}
