/**
 * Hand-outs: a delivery counts against its message's attempts from the moment it is handed out
 * (docs/storage.md, The log). It is noted in memory; just before the log's next write
 * (beforeWrite), each noted delivery still going on gets a HANDOUT record (commitLater), so a
 * delivery costs no write of its own. The tables keep the record before it until the delivery
 * ends (a hot path); a snapshot first applies those of messages in flight. At recovery, a
 * message whose latest record is a HANDOUT was being delivered when the process stopped: it is
 * buried if that was its last attempt, else handed over.
 */

import type { MessageState } from '../../queue/message.js';
import type { StoreDeliveries } from '../../queue/store.js';
import { RECORD_HEADER_BYTES, type MessageLog, type RecordSlot } from '../log/index.js';
import { HANDOUT, moveLength, writeMove } from './records.js';
import type { Checkpoints } from './checkpoint.js';
import type { Tables } from './table.js';

/** The file store's hand-outs: noted, written before the log's next write, applied at capture. */
export class HandOuts {
  /** Deliveries handed out since the log's last write... */
  private noted: MessageState[] = [];
  /** ...in batches: [the log's end when handed out, how many of `noted`] for each. */
  private batches: number[] = [];
  /** The queue's view of its deliveries, once it gave it (Store.useDeliveries). */
  deliveries: StoreDeliveries | undefined;

  constructor(
    private readonly parts: { log: MessageLog; tables: Tables; checkpoints: Checkpoints },
    /** The store's frontier (whether a record is indexed: FileStore.move's rule). */
    private readonly frontier: () => number,
    /** Whether the store still appends (not closed, stopped or without its lock). */
    private readonly appending: () => boolean,
  ) {
    parts.log.beforeWrite = this.write;
    parts.checkpoints.beforeCapture = () => this.beforeCapture();
  }

  note(messages: readonly MessageState[], count: number): void {
    if (count === 0) return;
    const noted = this.noted;
    for (let i = 0; i < count; i++) noted.push(messages[i]);
    this.batches.push(this.parts.log.end, count);
    this.parts.log.writeLater();
  }

  /**
   * HANDOUT records for the deliveries noted that are still going on (the log's beforeWrite): the
   * queue says so, and no record of the message was appended since it was handed out (an ack may
   * be appended before the queue is done).
   */
  readonly write = (): void => {
    const { noted, batches } = this;
    if (noted.length === 0) return;
    this.noted = [];
    this.batches = [];
    if (!this.appending()) return;
    const { log, tables, checkpoints } = this.parts;
    const delivering = this.deliveries?.delivering;
    let bytes = 0;
    let i = 0;
    for (let b = 0; b < batches.length; b += 2) {
      const end = batches[b]; // the log's end when this batch was handed out
      for (const to = i + batches[b + 1]; i < to; i++) {
        const message = noted[i];
        if (delivering !== undefined && !delivering(message)) continue;
        const latest = tables.latest(message.id);
        if (latest < 0 || latest >= end || tables.isDeadAt(message.id, latest)) continue;
        const length = writeHandOut(log, message);
        if (length < 0) return; // the log takes no more
        bytes += length;
      }
    }
    if (bytes > 0) checkpoints.appended(bytes);
  };

  /** Just before a snapshot captures the tables (Checkpoints.beforeCapture). */
  private beforeCapture(): void {
    this.write();
    if (this.deliveries !== undefined) {
      applyHandOuts(this.parts.tables, this.deliveries.inFlight(), this.frontier());
    }
  }
}

/** Appends a HANDOUT (commitLater) as the message's handOutRef; its bytes, or -1 if refused. */
function writeHandOut(log: MessageLog, message: MessageState): number {
  const length = moveLength(message);
  let slot: RecordSlot | undefined;
  try {
    slot = log.reserve(HANDOUT, length);
    writeMove(slot.buf, slot.at, message, message.deliverAt);
    message.handOutRef = slot.commitLater(length);
  } catch {
    slot?.abort();
    return -1;
  }
  return RECORD_HEADER_BYTES + length;
}

/**
 * Applies the HANDOUT records of messages in flight that the tables lack (their latest record
 * there is older); `frontier` tells whether one is indexed (FileStore.move's rule).
 */
function applyHandOuts(tables: Tables, inFlight: readonly MessageState[], frontier: number): void {
  let body: Buffer | undefined;
  for (const message of inFlight) {
    const position = message.handOutRef ?? Number.NaN;
    if (!(position >= 0)) continue;
    const latest = tables.latest(message.id);
    if (latest < 0 || latest >= position || tables.isDeadAt(message.id, latest)) continue;
    const length = moveLength(message);
    if (body === undefined || body.length < length) body = Buffer.alloc(Math.max(256, length));
    writeMove(body, 0, message, message.deliverAt);
    tables.apply(HANDOUT, body, 0, position, message.deliverAt >= frontier);
  }
}

/** A delivery the stop cut short: the BURY's promise if it was the last allowed, else undefined. */
export function endStoppedDelivery(
  message: MessageState,
  bury: (message: MessageState) => Promise<void>,
): Promise<void> | undefined {
  message.lastError =
    `the process stopped (exit, crash or restart) during delivery ${message.attempts} of ` +
    `${message.maxAttempts}, before an ack or nack`;
  return message.attempts >= message.maxAttempts ? bury(message) : undefined;
}
