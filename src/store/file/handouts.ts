/**
 * Hand-outs: a delivery counts against a message's attempts from the moment the message is
 * handed to a consumer, even if the process never gets to ack, nack or time it out.
 *
 * Each hand-out appends a HANDOUT record (records.ts: the MOVE layout, due time unchanged,
 * attempts including this delivery), which becomes the message's latest record in the log. It
 * is committed "later" (log/writer.ts, commitLater): it starts no write of its own and goes out
 * with the next group commit another record starts (an ack, a schedule), or LATER_MS after it
 * if none does, so a delivery costs no write or fsync of its own and delays nothing that waits
 * for one. A handler that ends the process with process.exit() or an uncaught exception still
 * leaves its count: staged records are written at exit (log/exit-write.ts). A SIGKILL, or a
 * power cut before the fsync, within that window loses the count of the deliveries it handed
 * out: those messages come back with one attempt fewer.
 *
 * The tables are not told at once (a hand-out is one of the hottest paths of a burst, and the
 * record changes nothing there but the message's latest position): they keep the message's
 * record before it until its delivery ends with an ack (FINISH), a retry (MOVE) or a dead
 * letter (BURY), which are applied as usual. Only a snapshot needs them: one taken while
 * messages are in flight would otherwise lose their hand-outs (its recovery replays only the
 * log after it). So just before a snapshot captures the tables, the hand-outs of the messages
 * in flight are applied (applyHandOuts), and the snapshot is the tables after every record
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
import { RECORD_HEADER_BYTES, type MessageLog, type RecordSlot } from '../log/index.js';
import { HANDOUT, moveLength, writeMove } from './records.js';
import type { Tables } from './table.js';

/**
 * Appends a HANDOUT record for each of `messages[0, count)` (committed later: see the top of
 * the file), notes its position as the message's handOutRef, and returns the bytes appended.
 * One that cannot be appended (the log is closed or failed) ends it: the deliveries go on,
 * only their counts are not kept.
 */
export function stageHandOuts(
  log: MessageLog,
  messages: readonly MessageState[],
  count: number,
): number {
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const message = messages[i];
    const length = moveLength(message);
    let slot: RecordSlot | undefined;
    try {
      slot = log.reserve(HANDOUT, length);
      writeMove(slot.buf, slot.at, message, message.deliverAt);
      message.handOutRef = slot.commitLater(length);
    } catch {
      slot?.abort();
      break;
    }
    bytes += RECORD_HEADER_BYTES + length;
  }
  return bytes;
}

/**
 * Applies to the tables the HANDOUT records of messages in flight that they do not have yet:
 * those whose latest record in the tables is older than their hand-out. A message whose
 * delivery ended since (its ack, retry or burial is newer, or it is finished) is left alone.
 * `frontier`: the store's, which tells whether a record is indexed (FileStore.move's rule).
 */
export function applyHandOuts(
  tables: Tables,
  inFlight: readonly MessageState[],
  frontier: number,
): void {
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
export function stoppedReason(message: MessageState): string {
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
