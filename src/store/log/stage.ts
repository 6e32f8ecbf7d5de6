/** The writer's units (writer.ts): stages, the record slot, durability promises, counts. */

import type { LogFailure } from './errors.js';
import { ignore } from './files.js';

export class Deferred {
  readonly promise: Promise<void>;
  resolve!: () => void;
  reject!: (error: LogFailure) => void;
  constructor() {
    this.promise = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Awaiting `durable` is optional: a failure must not crash the process as unhandled.
    this.promise.catch(ignore);
  }
}

/** Records staged for one write to one segment from `fileOffset`; fixed once taken. */
export interface Stage {
  readonly segment: number;
  readonly fileOffset: number;
  buf: Buffer;
  len: number;
  /** Bytes from the start of the stage that are durable; the rest is lost if a write fails. */
  kept: number;
  /** 'batch' and 'never': one promise for every record of the stage. */
  readonly done: Deferred | null;
  /** 'always': one promise per record, settled in order; `settled` of them so far. */
  readonly waiters: Deferred[] | null;
  settled: number;
  /** It holds a record committed with `commit`, or LATER_MS passed: it is to be written now. */
  urgent: boolean;
}

/** A record being appended (writer.ts). One per writer, reused. */
export interface RecordSlot {
  /** The staging buffer: write the body from `at`, at most the reserved length. */
  readonly buf: Buffer;
  readonly at: number;
  /** The `durable` promise of the record committed last. */
  readonly durable: Promise<void>;
  /** Completes the record with its real body length; returns its position. */
  commit(length: number): number;
  /** As commit, but starts no write (writer.ts). */
  commitLater(length: number): number;
  /** Gives the record up (its encoder failed): nothing is appended. */
  abort(): void;
}

export interface WriterStats {
  appends: number;
  writes: number;
  /** fsyncs of segment files (directory syncs after creating a segment are not counted). */
  fsyncs: number;
  fsyncMsTotal: number;
  fsyncMsMax: number;
  /** Writes or fsyncs that failed (each rolled the log back). */
  failures: number;
}
