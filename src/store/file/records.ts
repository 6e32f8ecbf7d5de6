/**
 * Bodies of the file store's log records (../log/format.ts adds the header; docs/storage.md, The
 * log, says what each means). Little-endian; ids and topics are ASCII, one byte a character.
 *
 *   SCHEDULE  deliverAt f64 | attempts u16 | maxAttempts u16 | backoff u8 (0 none, 1 fixed,
 *             2 exponential) | backoffDelay f64 | jitter f64 (NaN: unset) | maxDelay f64
 *             (NaN: unset) | payloadKind u8 | idLength u8 | topicLength u8 | id | topic |
 *             [trace] | payload
 *   MOVE      deliverAt f64 | attempts u16 | payloadPosition f64 | previousDeliverAt f64 |
 *             idLength u8 | topicLength u8 | id | topic | [reason]
 *   FINISH    outcome u8 (1 acked, 2 cancelled) | payloadPosition f64 | deliverAt f64 |
 *             idLength u8 | topicLength u8 | id | topic
 *   BURY      as MOVE (previousDeliverAt = deliverAt: burying does not change the due time)
 *   HANDOUT   as MOVE (previousDeliverAt = deliverAt), never a reason (handouts.ts)
 *   RELOCATE  from f64 | rank f64 | flags u8 (1 dead) | reasonLength u16 | a SCHEDULE body whose
 *             payload is preceded by the reason's reasonLength bytes (compaction.ts)
 *
 * reason (the message's lastError, if any): reasonLength u16 | UTF-8. trace (a SCHEDULE whose
 * payloadKind has 0x80 added): traceparentLength u8 | tracestateLength u16 | traceparent |
 * tracestate, ASCII.
 */

import { TickwheelCorruptError } from '../../errors.js';
import type { Backoff, MessageState } from '../../queue/message.js';
import { checkTraceContext, type TraceContext } from '../../protocol/trace-context.js';
import { readF64, writeAscii, writeF64, writeU16, writeUtf8 } from '../bytes.js';

export const SCHEDULE = 1;
export const MOVE = 2;
export const FINISH = 3;
export const BURY = 4;
export const HANDOUT = 5;
export const RELOCATE = 6;

export const OUTCOME_ACKED = 1;
export const OUTCOME_CANCELLED = 2;

/** Bytes before the id: each ends with idLength u8 | topicLength u8. */
const SCHEDULE_FIXED = 8 + 2 + 2 + 1 + 8 + 8 + 8 + 1 + 1 + 1;
const MOVE_FIXED = 8 + 2 + 8 + 8 + 1 + 1;
const FINISH_FIXED = 1 + 8 + 8 + 1 + 1;
/** Bytes of a RELOCATE before the SCHEDULE body it carries. */
export const RELOCATE_PREFIX = 8 + 8 + 1 + 2;
const RELOCATE_DEAD = 1;

/** The end every record shares: idLength u8 | topicLength u8 | id | topic. */
function writeIdAndTopic(buf: Uint8Array, at: number, message: MessageState): number {
  const { id, topic } = message;
  buf[at] = id.length;
  buf[at + 1] = topic.length;
  return writeAscii(buf, writeAscii(buf, at + 2, id), topic);
}

/** payloadKind's flag: a trace context follows the topic. */
const TRACED = 0x80;

export function scheduleLength(message: MessageState, payloadBytes: number): number {
  return (
    SCHEDULE_FIXED +
    message.id.length +
    message.topic.length +
    traceBytes(message.trace) +
    payloadBytes
  );
}

function traceBytes(trace: TraceContext | undefined): number {
  return trace === undefined ? 0 : 3 + trace.traceparent.length + (trace.tracestate?.length ?? 0);
}

/** Writes a SCHEDULE body but the payload, which the caller writes at the returned offset. */
export function writeScheduleHead(buf: Uint8Array, at: number, message: MessageState): number {
  const { backoff } = message;
  at = writeF64(buf, at, message.deliverAt);
  at = writeU16(buf, at, Math.min(message.attempts, 0xffff));
  at = writeU16(buf, at, message.maxAttempts);
  buf[at++] = backoff === undefined ? 0 : backoff.type === 'fixed' ? 1 : 2;
  at = writeF64(buf, at, backoff?.delayMs ?? 0);
  at = writeF64(buf, at, backoff?.jitter ?? NaN);
  at = writeF64(buf, at, backoff?.maxDelayMs ?? NaN);
  const trace = message.trace;
  buf[at++] = trace === undefined ? message.payloadKind : message.payloadKind | TRACED;
  at = writeIdAndTopic(buf, at, message);
  if (trace === undefined) return at;
  const state = trace.tracestate ?? '';
  buf[at] = trace.traceparent.length;
  at = writeU16(buf, at + 1, state.length);
  return writeAscii(buf, writeAscii(buf, at, trace.traceparent), state);
}

export interface ScheduleRecord {
  deliverAt: number;
  attempts: number;
  maxAttempts: number;
  backoff: Backoff | undefined;
  payloadKind: number;
  id: string;
  topic: string;
  payload: Uint8Array;
  trace: TraceContext | undefined;
}

export function decodeSchedule(body: Buffer): ScheduleRecord {
  const deliverAt = body.readDoubleLE(0);
  const attempts = body.readUInt16LE(8);
  const maxAttempts = body.readUInt16LE(10);
  const kind = body.readUInt8(12);
  const delayMs = body.readDoubleLE(13);
  const jitter = body.readDoubleLE(21);
  const maxDelayMs = body.readDoubleLE(29);
  const kindByte = body.readUInt8(37);
  const idLength = body.readUInt8(SCHEDULE_FIXED - 2);
  const topicLength = body.readUInt8(SCHEDULE_FIXED - 1);
  const id = body.toString('latin1', SCHEDULE_FIXED, SCHEDULE_FIXED + idLength);
  const topicStart = SCHEDULE_FIXED + idLength;
  const topic = body.toString('latin1', topicStart, topicStart + topicLength);
  let backoff: Backoff | undefined;
  if (kind !== 0) {
    backoff = { type: kind === 1 ? 'fixed' : 'exponential', delayMs };
    if (!Number.isNaN(jitter)) backoff.jitter = jitter;
    if (!Number.isNaN(maxDelayMs)) backoff.maxDelayMs = maxDelayMs;
  }
  let payloadStart = topicStart + topicLength;
  let trace: TraceContext | undefined;
  if ((kindByte & TRACED) !== 0) {
    if (payloadStart + 3 > body.length) throw badTrace(id);
    const parentStart = payloadStart + 3;
    const stateStart = parentStart + body[payloadStart];
    payloadStart = stateStart + body.readUInt16LE(payloadStart + 1);
    if (payloadStart > body.length) throw badTrace(id);
    // A context that does not parse is dropped: the message is still whole without it.
    trace = checkTraceContext({
      traceparent: body.toString('latin1', parentStart, stateStart),
      tracestate:
        stateStart === payloadStart ? undefined : body.toString('latin1', stateStart, payloadStart),
    });
  }
  const payloadKind = kindByte & ~TRACED;
  const payload = body.subarray(payloadStart);
  return { deliverAt, attempts, maxAttempts, backoff, payloadKind, id, topic, payload, trace };
}

function badTrace(id: string): TickwheelCorruptError {
  return new TickwheelCorruptError(
    `the SCHEDULE record of message ${id} says it has a trace context that runs past its end`,
  );
}

/** Bytes of a MOVE, BURY or HANDOUT body (one layout). */
export function moveLength(message: MessageState): number {
  return MOVE_FIXED + message.id.length + message.topic.length;
}

/**
 * Writes a MOVE, BURY or HANDOUT body at `at`; returns where it ends. `previousDeliverAt`: the
 * due time before this record (for BURY and HANDOUT, the current one).
 */
export function writeMove(
  buf: Uint8Array,
  at: number,
  message: MessageState,
  previousDeliverAt: number,
): number {
  at = writeF64(buf, at, message.deliverAt);
  at = writeU16(buf, at, Math.min(message.attempts, 0xffff));
  at = writeF64(buf, at, message.ref);
  at = writeF64(buf, at, previousDeliverAt);
  return writeIdAndTopic(buf, at, message);
}

/** Room for a MOVE or BURY body and its reason, at most 3 UTF-8 bytes a UTF-16 unit. */
export function moveWithReasonRoom(message: MessageState): number {
  const reason = reasonText(message);
  return moveLength(message) + (reason === '' ? 0 : 2 + reason.length * 3);
}

/** Writes a MOVE or BURY body and its reason, if any, at `at`; returns where it ends. */
export function writeMoveWithReason(
  buf: Buffer,
  at: number,
  message: MessageState,
  previousDeliverAt: number,
): number {
  const end = writeMove(buf, at, message, previousDeliverAt);
  const reason = reasonText(message);
  if (reason === '') return end;
  const reasonEnd = writeUtf8(buf, end + 2, reason);
  writeU16(buf, end, reasonEnd - end - 2);
  return reasonEnd;
}

/** The queue cuts reasons to a few hundred characters; this bound keeps a u16 length true. */
const MAX_REASON_UNITS = 0xffff / 3;

export function reasonText(message: MessageState): string {
  const reason = message.lastError ?? '';
  return reason.length > MAX_REASON_UNITS ? reason.slice(0, MAX_REASON_UNITS) : reason;
}

interface MoveRecord {
  deliverAt: number;
  attempts: number;
  payloadPosition: number;
  previousDeliverAt: number;
  id: string;
  topic: string;
  lastError: string | undefined;
}

export function decodeMove(body: Buffer): MoveRecord {
  const idLength = body.readUInt8(MOVE_FIXED - 2);
  const topicLength = body.readUInt8(MOVE_FIXED - 1);
  const end = MOVE_FIXED + idLength + topicLength;
  const reasonLength = body.length >= end + 2 ? body.readUInt16LE(end) : 0;
  return {
    lastError:
      reasonLength > 0 ? body.toString('utf8', end + 2, end + 2 + reasonLength) : undefined,
    deliverAt: body.readDoubleLE(0),
    attempts: body.readUInt16LE(8),
    payloadPosition: body.readDoubleLE(10),
    previousDeliverAt: body.readDoubleLE(18),
    id: body.toString('latin1', MOVE_FIXED, MOVE_FIXED + idLength),
    topic: body.toString('latin1', MOVE_FIXED + idLength, MOVE_FIXED + idLength + topicLength),
  };
}

export function finishLength(message: MessageState): number {
  return FINISH_FIXED + message.id.length + message.topic.length;
}

/** Writes a FINISH body at `at` (with the due time the message had); returns its end. */
export function writeFinish(
  buf: Uint8Array,
  at: number,
  message: MessageState,
  outcome: number,
): number {
  buf[at++] = outcome;
  at = writeF64(buf, at, message.ref);
  at = writeF64(buf, at, message.deliverAt);
  return writeIdAndTopic(buf, at, message);
}

export function encodeFinish(message: MessageState, outcome: number): Buffer {
  const body = Buffer.allocUnsafe(finishLength(message));
  writeFinish(body, 0, message, outcome);
  return body;
}

// The readers below take the record body at offset `at` of `buf` (0: `buf` is the body), so
// that a record still in the log's staging buffer is read where it is.

/** Where the id of any record starts (relative to `at`). */
export function idStart(type: number): number {
  if (type === SCHEDULE) return SCHEDULE_FIXED;
  if (type === FINISH) return FINISH_FIXED;
  return type === RELOCATE ? RELOCATE_PREFIX + SCHEDULE_FIXED : MOVE_FIXED;
}

export function idLength(type: number, buf: Uint8Array, at = 0): number {
  return buf[at + idStart(type) - 2];
}

/** Where the topic of any record starts (relative to `at`), and its length. */
export function topicStart(type: number, buf: Uint8Array, at = 0): number {
  return idStart(type) + idLength(type, buf, at);
}

export function topicLength(type: number, buf: Uint8Array, at = 0): number {
  return buf[at + idStart(type) - 1];
}

/** The id of any record, without decoding the rest. */
export function recordId(type: number, buf: Buffer, at = 0): string {
  const start = at + idStart(type);
  return buf.toString('latin1', start, start + idLength(type, buf, at));
}

/** The due time a record leaves its message with, or had before it (FINISH). */
export function recordDeliverAt(type: number, buf: Uint8Array, at = 0): number {
  return readF64(buf, at + (type === FINISH ? 9 : type === RELOCATE ? RELOCATE_PREFIX : 0));
}

/** The due time a MOVE, BURY or HANDOUT record moves its message from. */
export function previousDeliverAt(buf: Uint8Array, at = 0): number {
  return readF64(buf, at + 18);
}

/** The position of the message's SCHEDULE record, from a MOVE, BURY or FINISH record. */
export function payloadPositionOf(type: number, buf: Uint8Array, at = 0): number {
  return readF64(buf, at + (type === FINISH ? 1 : 10));
}

/**
 * A live message's state carried forward by compaction: the SCHEDULE record that held its
 * payload (`from`) and every later record of it are superseded. `rank`: the position that orders
 * it among messages of equal due time (that of the record which gave it its due time).
 */
export interface RelocateRecord {
  from: number;
  rank: number;
  dead: boolean;
  reason: string | undefined;
  schedule: ScheduleRecord;
}

/** Bytes of a RELOCATE body of `message` with `payloadBytes` of payload. */
export function relocateLength(message: MessageState, payloadBytes: number): number {
  const reason = Buffer.byteLength(reasonText(message), 'utf8');
  return RELOCATE_PREFIX + scheduleLength(message, payloadBytes) + reason;
}

/** Writes a RELOCATE body at `at` but the payload, which the caller writes at the returned offset. */
export function writeRelocateHead(
  buf: Buffer,
  at: number,
  message: MessageState,
  relocation: { from: number; rank: number; dead: boolean },
): number {
  writeF64(buf, at, relocation.from);
  writeF64(buf, at + 8, relocation.rank);
  buf[at + 16] = relocation.dead ? RELOCATE_DEAD : 0;
  const reasonAt = writeScheduleHead(buf, at + RELOCATE_PREFIX, message);
  const end = writeUtf8(buf, reasonAt, reasonText(message));
  writeU16(buf, at + 17, end - reasonAt);
  return end;
}

export function decodeRelocate(body: Buffer): RelocateRecord {
  const reasonLength = body.readUInt16LE(17);
  const schedule = decodeSchedule(body.subarray(RELOCATE_PREFIX));
  const carried = schedule.payload;
  schedule.payload = carried.subarray(reasonLength);
  return {
    from: body.readDoubleLE(0),
    rank: body.readDoubleLE(8),
    dead: (body[16] & RELOCATE_DEAD) !== 0,
    reason:
      reasonLength === 0
        ? undefined
        : Buffer.from(carried.buffer, carried.byteOffset, reasonLength).toString('utf8'),
    schedule,
  };
}

/** The message a SCHEDULE or RELOCATE record holds (its payload with it). */
export function decodeOrigin(type: number, body: Buffer): ScheduleRecord {
  return type === RELOCATE ? decodeRelocate(body).schedule : decodeSchedule(body);
}

/** Whether a record holds a payload: a SCHEDULE or a RELOCATE. */
export function holdsPayload(type: number): boolean {
  return type === SCHEDULE || type === RELOCATE;
}

/** From a RELOCATE at `at`: the position of the record that held the payload before. */
export function relocatedFrom(buf: Uint8Array, at = 0): number {
  return readF64(buf, at);
}

/** From a RELOCATE at `at`: the position that ranks its message (see RelocateRecord). */
export function relocatedRank(buf: Uint8Array, at = 0): number {
  return readF64(buf, at + 8);
}

/** From a RELOCATE at `at`: whether the message it carries is dead. */
export function relocatedDead(buf: Uint8Array, at = 0): boolean {
  return (buf[at + 16] & RELOCATE_DEAD) !== 0;
}
