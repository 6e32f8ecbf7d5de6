/**
 * Bodies of the file store's log records (the log adds magic, type, length and CRC around
 * them; see log.ts). All little-endian; ids and topics are ASCII (their patterns allow nothing
 * else), so one byte per character.
 *
 *   SCHEDULE  deliverAt f64 | attempts u16 | maxAttempts u16 | backoff u8 (0 none, 1 fixed,
 *             2 exponential) | backoffDelay f64 | jitter f64 (NaN: unset) | maxDelay f64
 *             (NaN: unset) | payloadKind u8 | idLength u8 | topicLength u8 | id | topic | payload
 *   MOVE      deliverAt f64 | attempts u16 | payloadPosition f64 | idLength u8 | id
 *   FINISH    outcome u8 (1 acked, 2 cancelled) | payloadPosition f64 | idLength u8 | id
 *   BURY      deliverAt f64 | attempts u16 | payloadPosition f64 | idLength u8 | id
 *
 * A SCHEDULE record holds the payload; the later records of the same message point back at it.
 */

import type { Backoff, MessageState } from '../queue/message.js';

export const SCHEDULE = 1;
export const MOVE = 2;
export const FINISH = 3;
export const BURY = 4;

export const OUTCOME_ACKED = 1;
export const OUTCOME_CANCELLED = 2;

const SCHEDULE_FIXED = 8 + 2 + 2 + 1 + 8 + 8 + 8 + 1 + 1 + 1;
const MOVE_FIXED = 8 + 2 + 8 + 1;
const FINISH_FIXED = 1 + 8 + 1;

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
  const idLength = body.readUInt8(38);
  const topicLength = body.readUInt8(39);
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

/** MOVE and BURY share a layout. */
export function encodeMove(message: MessageState): Buffer {
  const body = Buffer.allocUnsafe(MOVE_FIXED + message.id.length);
  let at = body.writeDoubleLE(message.deliverAt, 0);
  at = body.writeUInt16LE(Math.min(message.attempts, 0xffff), at);
  at = body.writeDoubleLE(message.ref, at);
  at = body.writeUInt8(message.id.length, at);
  body.write(message.id, at, 'latin1');
  return body;
}

export interface MoveRecord {
  deliverAt: number;
  attempts: number;
  payloadPosition: number;
  id: string;
}

export function decodeMove(body: Buffer): MoveRecord {
  const idLength = body.readUInt8(18);
  return {
    deliverAt: body.readDoubleLE(0),
    attempts: body.readUInt16LE(8),
    payloadPosition: body.readDoubleLE(10),
    id: body.toString('latin1', MOVE_FIXED, MOVE_FIXED + idLength),
  };
}

export function encodeFinish(message: MessageState, outcome: number): Buffer {
  const body = Buffer.allocUnsafe(FINISH_FIXED + message.id.length);
  let at = body.writeUInt8(outcome, 0);
  at = body.writeDoubleLE(message.ref, at);
  at = body.writeUInt8(message.id.length, at);
  body.write(message.id, at, 'latin1');
  return body;
}

export interface FinishRecord {
  outcome: number;
  payloadPosition: number;
  id: string;
}

export function decodeFinish(body: Buffer): FinishRecord {
  const idLength = body.readUInt8(9);
  return {
    outcome: body.readUInt8(0),
    payloadPosition: body.readDoubleLE(1),
    id: body.toString('latin1', FINISH_FIXED, FINISH_FIXED + idLength),
  };
}

/** Where the id of any record starts, and its length: [start, length]. */
export function idSpan(type: number, body: Buffer): [number, number] {
  if (type === SCHEDULE) return [SCHEDULE_FIXED, body[38]];
  if (type === FINISH) return [FINISH_FIXED, body[9]];
  return [MOVE_FIXED, body[18]];
}

/** The id of any record, without decoding the rest. */
export function recordId(type: number, body: Buffer): string {
  if (type === SCHEDULE) {
    const idLength = body.readUInt8(38);
    return body.toString('latin1', SCHEDULE_FIXED, SCHEDULE_FIXED + idLength);
  }
  if (type === FINISH)
    return body.toString('latin1', FINISH_FIXED, FINISH_FIXED + body.readUInt8(9));
  return body.toString('latin1', MOVE_FIXED, MOVE_FIXED + body.readUInt8(18));
}
