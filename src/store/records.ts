/**
 * Bodies of the file store's log records (the log adds magic, type, length and CRC around
 * them; see log.ts). All little-endian; ids and topics are ASCII (their patterns allow nothing
 * else), so one byte per character.
 *
 *   SCHEDULE  deliverAt f64 | attempts u16 | maxAttempts u16 | backoff u8 (0 none, 1 fixed,
 *             2 exponential) | backoffDelay f64 | jitter f64 (NaN: unset) | maxDelay f64
 *             (NaN: unset) | payloadKind u8 | idLength u8 | topicLength u8 | id | topic | payload
 *   MOVE      deliverAt f64 | attempts u16 | payloadPosition f64 | previousDeliverAt f64 |
 *             idLength u8 | topicLength u8 | id | topic
 *   FINISH    outcome u8 (1 acked, 2 cancelled) | payloadPosition f64 | deliverAt f64 |
 *             idLength u8 | topicLength u8 | id | topic
 *   BURY      as MOVE (previousDeliverAt = deliverAt: burying does not change the due time)
 *
 * A SCHEDULE record holds the payload; the later records of the same message point back at it.
 * MOVE, FINISH and BURY also carry the due time the message had before them and its topic, so
 * that a replay can keep the per-topic and per-hour counts (counts.ts) without reading the
 * message's earlier records.
 */

import type { Backoff, MessageState } from '../queue/message.js';

export const SCHEDULE = 1;
export const MOVE = 2;
export const FINISH = 3;
export const BURY = 4;

export const OUTCOME_ACKED = 1;
export const OUTCOME_CANCELLED = 2;

const SCHEDULE_FIXED = 8 + 2 + 2 + 1 + 8 + 8 + 8 + 1 + 1 + 1;
const MOVE_FIXED = 8 + 2 + 8 + 8 + 1 + 1;
const FINISH_FIXED = 1 + 8 + 8 + 1 + 1;
/** Where idLength is in each record; topicLength follows it. */
const SCHEDULE_ID_LENGTH = 38;
const MOVE_ID_LENGTH = 26;
const FINISH_ID_LENGTH = 17;

export function encodeSchedule(message: MessageState, payload: Uint8Array): Buffer {
  const { id, topic, backoff } = message;
  const body = Buffer.allocUnsafe(SCHEDULE_FIXED + id.length + topic.length + payload.byteLength);
  let at = body.writeDoubleLE(message.deliverAt, 0);
  at = body.writeUInt16LE(Math.min(message.attempts, 0xffff), at);
  at = body.writeUInt16LE(message.maxAttempts, at);
  at = body.writeUInt8(backoff === undefined ? 0 : backoff.type === 'fixed' ? 1 : 2, at);
  at = body.writeDoubleLE(backoff?.delayMs ?? 0, at);
  at = body.writeDoubleLE(backoff?.jitter ?? NaN, at);
  at = body.writeDoubleLE(backoff?.maxDelayMs ?? NaN, at);
  at = body.writeUInt8(message.payloadKind, at);
  at = body.writeUInt8(id.length, at);
  at = body.writeUInt8(topic.length, at);
  at += body.write(id, at, 'latin1');
  at += body.write(topic, at, 'latin1');
  body.set(payload, at);
  return body;
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
}

export function decodeSchedule(body: Buffer): ScheduleRecord {
  const deliverAt = body.readDoubleLE(0);
  const attempts = body.readUInt16LE(8);
  const maxAttempts = body.readUInt16LE(10);
  const kind = body.readUInt8(12);
  const delayMs = body.readDoubleLE(13);
  const jitter = body.readDoubleLE(21);
  const maxDelayMs = body.readDoubleLE(29);
  const payloadKind = body.readUInt8(37);
  const idLength = body.readUInt8(SCHEDULE_ID_LENGTH);
  const topicLength = body.readUInt8(SCHEDULE_ID_LENGTH + 1);
  const id = body.toString('latin1', SCHEDULE_FIXED, SCHEDULE_FIXED + idLength);
  const topicStart = SCHEDULE_FIXED + idLength;
  const topic = body.toString('latin1', topicStart, topicStart + topicLength);
  let backoff: Backoff | undefined;
  if (kind !== 0) {
    backoff = { type: kind === 1 ? 'fixed' : 'exponential', delayMs };
    if (!Number.isNaN(jitter)) backoff.jitter = jitter;
    if (!Number.isNaN(maxDelayMs)) backoff.maxDelayMs = maxDelayMs;
  }
  const payload = body.subarray(topicStart + topicLength);
  return { deliverAt, attempts, maxAttempts, backoff, payloadKind, id, topic, payload };
}

/**
 * MOVE and BURY share a layout. `previousDeliverAt`: the due time of the message's latest
 * record before this one (for BURY, the message's current due time).
 */
export function encodeMove(message: MessageState, previousDeliverAt: number): Buffer {
  const { id, topic } = message;
  const body = Buffer.allocUnsafe(MOVE_FIXED + id.length + topic.length);
  let at = body.writeDoubleLE(message.deliverAt, 0);
  at = body.writeUInt16LE(Math.min(message.attempts, 0xffff), at);
  at = body.writeDoubleLE(message.ref, at);
  at = body.writeDoubleLE(previousDeliverAt, at);
  at = body.writeUInt8(id.length, at);
  at = body.writeUInt8(topic.length, at);
  at += body.write(id, at, 'latin1');
  body.write(topic, at, 'latin1');
  return body;
}

export interface MoveRecord {
  deliverAt: number;
  attempts: number;
  payloadPosition: number;
  previousDeliverAt: number;
  id: string;
  topic: string;
}

export function decodeMove(body: Buffer): MoveRecord {
  const idLength = body.readUInt8(MOVE_ID_LENGTH);
  const topicLength = body.readUInt8(MOVE_ID_LENGTH + 1);
  return {
    deliverAt: body.readDoubleLE(0),
    attempts: body.readUInt16LE(8),
    payloadPosition: body.readDoubleLE(10),
    previousDeliverAt: body.readDoubleLE(18),
    id: body.toString('latin1', MOVE_FIXED, MOVE_FIXED + idLength),
    topic: body.toString('latin1', MOVE_FIXED + idLength, MOVE_FIXED + idLength + topicLength),
  };
}

/** `message.deliverAt` is the due time the message had until now (finishing keeps it). */
export function encodeFinish(message: MessageState, outcome: number): Buffer {
  const { id, topic } = message;
  const body = Buffer.allocUnsafe(FINISH_FIXED + id.length + topic.length);
  let at = body.writeUInt8(outcome, 0);
  at = body.writeDoubleLE(message.ref, at);
  at = body.writeDoubleLE(message.deliverAt, at);
  at = body.writeUInt8(id.length, at);
  at = body.writeUInt8(topic.length, at);
  at += body.write(id, at, 'latin1');
  body.write(topic, at, 'latin1');
  return body;
}

export interface FinishRecord {
  outcome: number;
  payloadPosition: number;
  deliverAt: number;
  id: string;
  topic: string;
}

export function decodeFinish(body: Buffer): FinishRecord {
  const idLength = body.readUInt8(FINISH_ID_LENGTH);
  const topicLength = body.readUInt8(FINISH_ID_LENGTH + 1);
  return {
    outcome: body.readUInt8(0),
    payloadPosition: body.readDoubleLE(1),
    deliverAt: body.readDoubleLE(9),
    id: body.toString('latin1', FINISH_FIXED, FINISH_FIXED + idLength),
    topic: body.toString('latin1', FINISH_FIXED + idLength, FINISH_FIXED + idLength + topicLength),
  };
}

function fixedPart(type: number): number {
  return type === SCHEDULE ? SCHEDULE_FIXED : type === FINISH ? FINISH_FIXED : MOVE_FIXED;
}

function idLengthAt(type: number): number {
  return type === SCHEDULE
    ? SCHEDULE_ID_LENGTH
    : type === FINISH
      ? FINISH_ID_LENGTH
      : MOVE_ID_LENGTH;
}

/** Where the id of any record starts, and its length: [start, length]. */
export function idSpan(type: number, body: Buffer): [number, number] {
  return [fixedPart(type), body[idLengthAt(type)]];
}

/** Where the topic of any record starts, and its length: [start, length]. */
export function topicSpan(type: number, body: Buffer): [number, number] {
  const at = idLengthAt(type);
  return [fixedPart(type) + body[at], body[at + 1]];
}

/** The id of any record, without decoding the rest. */
export function recordId(type: number, body: Buffer): string {
  const start = fixedPart(type);
  return body.toString('latin1', start, start + body[idLengthAt(type)]);
}

/**
 * The due time a record leaves its message with (SCHEDULE, MOVE, BURY), or had before it
 * (FINISH).
 */
export function recordDeliverAt(type: number, body: Buffer): number {
  return body.readDoubleLE(type === FINISH ? 9 : 0);
}

/** The due time a MOVE or BURY record moves its message from. */
export function previousDeliverAt(body: Buffer): number {
  return body.readDoubleLE(18);
}

/** The position of the message's SCHEDULE record, from a MOVE, BURY or FINISH record. */
export function payloadPositionOf(type: number, body: Buffer): number {
  return body.readDoubleLE(type === FINISH ? 1 : 10);
}
