/**
 * Hand-outs: a delivery counts against a message's attempts from the moment the message is
 * handed to a consumer, even if the process never gets to ack, nack or time it out.
 *
 * A hand-out is noted in memory only (a push onto a list). Just before the log's next write
 * (log/writer.ts, beforeWrite: the group commit another record starts, an ack or a schedule, or
 * LATER_MS after the hand-out if none does), each delivery noted that is still in progress
 * (StoreDeliveries.delivering: not acked, nacked or timed out, its handler not done; and no
 * record of the message appended since the hand-out, as an ack's or a retry's is before the
 * queue is done with it) gets a HANDOUT record (records.ts: the MOVE layout, due time
 * unchanged, attempts including this delivery), which becomes the message's latest record in
 * the log; one that ended meanwhile needs none, its ack or retry being newer. So a delivery costs no write or fsync of its own
 * and delays nothing that waits for one, and in a burst, whose deliveries end within a commit
 * window, almost no HANDOUT is written at all. A handler that ends the process with
 * process.exit() or an uncaught exception still leaves its count: the log writes at exit, and
 * the HANDOUT records are made then (log/exit-write.ts). A SIGKILL, or a power cut before the
 * fsync, within that window loses the count of the deliveries handed out in it: those
 * messages come back with one attempt fewer.
 *
 * The tables are not told at once (a hand-out is one of the hottest paths of a burst, and the
 * record changes nothing there but the message's latest position): they keep the message's
 * record before it until its delivery ends with an ack (FINISH), a retry (MOVE) or a dead
 * letter (BURY), which are applied as usual. Only a snapshot needs them: one taken while
 * messages are in flight would otherwise lose their hand-outs (its recovery replays only the
 * log after it). So just before a snapshot captures the tables, the hand-outs noted are
 * written and those of the messages in flight applied (applyHandOuts), and the snapshot is the tables after every record
 * before its position, as a replay would make them. A replay of the log applies every
 * HANDOUT it reads, as a MOVE.
 *
 * At recovery a message whose latest record is a HANDOUT was handed out and never acked,
 * nacked or timed out after it: the process stopped during that delivery. With its attempts
 * used up it is buried (a dead letter) with a reason saying so, so a message that crashes its
 * consumer cannot come back forever; otherwise it is handed to the queue, due at once, with
 * that reason as its lastError.
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
  /**
   * ...in batches: [end, count] for each, the log's end when it was handed out (every record
   * of its messages from then on is at or after it) and how many of `noted` it holds.
   */
  private batches: number[] = [];
  /** The queue's view of its deliveries, once it gave it (Store.useDeliveries). */
  deliveries: StoreDeliveries | undefined;

  private readonly log: MessageLog;
  private readonly tables: Tables;
  private readonly checkpoints: Checkpoints;

  constructor(
    parts: { log: MessageLog; tables: Tables; checkpoints: Checkpoints },
    /** The store's frontier (whether a record is indexed: FileStore.move's rule). */
    private readonly frontier: () => number,
    /** Whether the store still appends (not closed, stopped or without its lock). */
    private readonly appending: () => boolean,
  ) {
    ({ log: this.log, tables: this.tables, checkpoints: this.checkpoints } = parts);
    this.log.beforeWrite = this.write;
    this.checkpoints.beforeCapture = () => this.beforeCapture();
  }

  note(messages: readonly MessageState[], count: number): void {
    if (count === 0) return;
    const noted = this.noted;
    for (let i = 0; i < count; i++) noted.push(messages[i]);
    this.batches.push(this.log.end, count);
    this.log.writeLater();
  }

  /** HANDOUT records for the deliveries noted that are still going on (the log's beforeWrite). */
  readonly write = (): void => {
    const { noted, batches } = this;
    if (noted.length === 0) return;
    this.noted = [];
    this.batches = [];
    if (!this.appending()) return;
    let bytes = 0;
    let at = 0;
    for (let b = 0; b < batches.length && bytes >= 0; b += 2) {
      const more = this.writeBatch(noted, at, at + batches[b + 1], batches[b]);
      bytes = more < 0 ? -1 : bytes + more;
      at += batches[b + 1];
    }
    if (bytes > 0) this.checkpoints.appended(bytes);
  };

  /**
   * HANDOUT records for `noted[from, to)`, handed out when the log ended at `end`: for each
   * still being delivered (the queue says so, and the store has no record of it from `end` on:
   * its ack, retry or burial may be appended before the queue is done with it). Returns the
   * bytes appended, or -1 once the log takes no more (the deliveries go on, uncounted).
   */
  private writeBatch(noted: MessageState[], from: number, to: number, end: number): number {
    const delivering = this.deliveries?.delivering;
    const tables = this.tables;
    let bytes = 0;
    for (let i = from; i < to; i++) {
      const message = noted[i];
      if (delivering !== undefined && !delivering(message)) continue;
      const latest = tables.latest(message.id);
      if (latest < 0 || latest >= end || tables.isDeadAt(message.id, latest)) continue;
      const length = writeHandOut(this.log, message);
      if (length < 0) return -1;
      bytes += length;
    }
    return bytes;
  }

  /** Just before a snapshot captures the tables (Checkpoints.beforeCapture). */
  private beforeCapture(): void {
    this.write();
    if (this.deliveries !== undefined) {
      applyHandOuts(this.tables, this.deliveries.inFlight(), this.frontier());
    }
  }
}

/**
 * Appends a message's HANDOUT record, committed later (see the top of the file), and notes its
 * position as the message's handOutRef. Returns the bytes appended, or -1 if the log takes no
 * more records (closed or failed).
 */
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
 * Applies to the tables the HANDOUT records of messages in flight that they do not have yet:
 * those whose latest record in the tables is older than their hand-out. A message whose
 * delivery ended since (its ack, retry or burial is newer, or it is finished) is left alone.
 * `frontier`: the store's, which tells whether a record is indexed (FileStore.move's rule).
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

/** Why a delivery ended without an ack, nack or timeout: the process stopped under it. */
function stoppedReason(message: MessageState): string {
  return (
    `the process stopped (exit, crash or restart) during delivery ${message.attempts} of ` +
    `${message.maxAttempts}, before an ack or nack`
  );
}

/**
 * A message found at recovery with a delivery that never ended: its lastError says so, and it
 * is buried (the promise of its BURY) if that delivery was its last allowed one, else left to
 * be handed to the queue (undefined).
 */
export function endStoppedDelivery(
  message: MessageState,
  bury: (message: MessageState) => Promise<void>,
): Promise<void> | undefined {
  message.lastError = stoppedReason(message);
  return message.attempts >= message.maxAttempts ? bury(message) : undefined;
}
