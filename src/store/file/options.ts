/**
 * The file store's options, checked: every bad value is ERR_TICKWHEEL_INVALID_OPTION with what
 * to change, and an option the store does not know is refused with the closest one it does.
 */

import { TickwheelTypeError } from '../../errors.js';
import { checkKnownOptions, checkOption, describe, optionNames } from '../../validate.js';
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
   * A checkpoint also writes a snapshot of the tables once the log has grown by this many
   * bytes since the last one, or by the last snapshot's size if that is larger; close()
   * writes one whenever the log grew. Default 64 MiB. Infinity: never (recovery then replays
   * the whole log).
   */
  snapshotBytes?: number;
  /**
   * Open a data directory whose log is damaged where it had been made durable by dropping what
   * cannot be read, and report exactly what (`recovery.repair`, and `repair.json` in the
   * directory), instead of refusing with ERR_TICKWHEEL_CORRUPT. See docs/storage.md, Recovery.
   */
  repair?: boolean;
  /**
   * Log records one list() page reads at most to find a topic's messages beyond the horizon
   * (docs/storage.md, "Browsing what is scheduled"). Default 8,192.
   */
  listScanRecords?: number;
  /**
   * Takes the store's background faults: index and checkpoint writes failing and healing, a
   * snapshot not written, a damaged message skipped, the LOCK lost (src/queue/faults.ts).
   * Default: process warnings.
   */
  onFault?: FaultHandler;
  /** @internal Test hook: replaces the log writer's file operations (see MessageLog). */
  logIo?: Partial<LogIo>;
}

const DEFAULT_SNAPSHOT_BYTES = 64 * 1024 * 1024;
const DEFAULT_LIST_SCAN_RECORDS = 8_192;

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
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `dir must be a directory path, got ${describe(options?.dir)}`,
    );
  }
  checkKnownOptions(options, KNOWN_OPTIONS, 'FileStore.open()');
  const fsync: FsyncPolicy = options.fsync ?? 'batch';
  if (fsync !== 'batch' && fsync !== 'always' && fsync !== 'never') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `fsync must be 'batch', 'always' or 'never', got ${String(fsync)}`,
    );
  }
  const windowMs = checkOption(options.windowMs ?? 60_000, 'windowMs', 1, 86_400_000, true);
  const interval = checkOption(options.checkpointIntervalMs ?? 5000, 'checkpointIntervalMs', 10);
  const snapshotBytes = checkOption(
    options.snapshotBytes ?? DEFAULT_SNAPSHOT_BYTES,
    'snapshotBytes',
    0,
    Infinity,
  );
  const listScanRecords = checkOption(
    options.listScanRecords ?? DEFAULT_LIST_SCAN_RECORDS,
    'listScanRecords',
    1,
    1_000_000,
    true,
  );
  return { fsync, windowMs, interval, snapshotBytes, listScanRecords };
}
