/** The file store's options, checked (ERR_TICKWHEEL_INVALID_OPTION saying what to change). */

import {
  checkFlag,
  checkKnownOptions,
  checkOption,
  describe,
  invalidOption,
  optionNames,
} from '../../validate.js';
import type { FaultHandler } from '../../queue/faults.js';
import type { FsyncPolicy, LogIo } from '../log/index.js';

export interface FileStoreOptions {
  dir: string;
  /** 'batch' (default): group commit; 'always': one fsync per change; 'never': no fsync. */
  fsync?: FsyncPolicy;
  /** Log segment size. Default 64 MiB. */
  segmentBytes?: number;
  /** Width of one schedule-index window. Default 60,000 ms. */
  windowMs?: number;
  /** How often index files are synced and a checkpoint written. Default 5,000 ms. */
  checkpointIntervalMs?: number;
  /**
   * A checkpoint writes a snapshot once the log grew by this (or the last snapshot's size, if
   * larger); close() whenever it grew. Default 64 MiB; Infinity: never.
   */
  snapshotBytes?: number;
  /**
   * Open a directory with damaged durable bytes by dropping what cannot be read, reported in
   * `recovery.repair` and repair.json (docs/storage.md, Recovery).
   */
  repair?: boolean;
  /** Log records one list() page reads at most beyond the horizon. Default 8,192. */
  listScanRecords?: number;
  /** Takes the store's background faults (src/queue/faults.ts). Default: process warnings. */
  onFault?: FaultHandler;
  /** @internal Test hook: replaces the log writer's file operations (see MessageLog). */
  logIo?: Partial<LogIo>;
}

/** The options of a file store that DelayQueue.open() takes as its own: all but the test hook. */
export const FILE_STORE_OPTIONS = {
  dir: true,
  fsync: true,
  segmentBytes: true,
  windowMs: true,
  checkpointIntervalMs: true,
  snapshotBytes: true,
  repair: true,
  listScanRecords: true,
  onFault: true,
} as const satisfies Record<Exclude<keyof FileStoreOptions, 'logIo'>, true>;

const KNOWN_OPTIONS = optionNames<FileStoreOptions>({ ...FILE_STORE_OPTIONS, logIo: true });

export function checkFileStoreOptions(options: FileStoreOptions) {
  if (typeof options?.dir !== 'string' || options.dir.length === 0) {
    throw invalidOption(`dir must be a directory path, got ${describe(options?.dir)}`);
  }
  checkKnownOptions(options, KNOWN_OPTIONS, 'FileStore.open()');
  const fsync: FsyncPolicy = options.fsync ?? 'batch';
  if (fsync !== 'batch' && fsync !== 'always' && fsync !== 'never') {
    throw invalidOption(`fsync must be 'batch', 'always' or 'never', got ${String(fsync)}`);
  }
  checkFlag(options.repair, 'repair');
  const windowMs = checkOption(options.windowMs ?? 60_000, 'windowMs', 1, 86_400_000, true);
  const interval = checkOption(options.checkpointIntervalMs ?? 5000, 'checkpointIntervalMs', 10);
  const snapshotBytes = checkOption(
    options.snapshotBytes ?? 64 * 1024 * 1024,
    'snapshotBytes',
    0,
    Infinity,
  );
  const listScanRecords = checkOption(
    options.listScanRecords ?? 8_192,
    'listScanRecords',
    1,
    1_000_000,
    true,
  );
  return { fsync, windowMs, interval, snapshotBytes, listScanRecords };
}
