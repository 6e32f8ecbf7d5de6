/**
 * A message as a partitioned queue stores it in a segment (driver.ts): the parts that never
 * change while it lives (its status, due time and attempts are in its id's state). Little-endian:
 *
 *   idLength u8 | id | bucket u16 | maxAttempts u16 | backoff u8 | [delayMs f64]
 *   [jitter f64] [maxDelayMs f64] | payloadKind u8 | topicLength u8 | topic | [trace] | payload
 *
 * Stores read the first three fields (on Valkey, src/cluster/lua/states.lua), so those never
 * move. `backoff`: 0 none, 1 fixed,
 * 2 exponential; +4 a jitter follows, +8 a maxDelayMs, +16 the W3C trace context after the topic
 * (traceparentLength u8 | tracestateLength u16 | traceparent | tracestate). Ids and topics are
 * ASCII. A located record (docs/cluster.md, "Located ids") starts `0 u8 | tagLength u8 | tag |
 * dueLength u8 | deliverAt (decimal)`, then maxAttempts and the rest; its random tag tells it
 * from another record at the same index of a window segment made anew.
 */

import { TickwheelCorruptError, TickwheelRangeError } from '../errors.js';
import type { Backoff } from '../queue/message.js';
import { fnv1a, mix32 } from './rendezvous.js';
import {
  MAX_TRACESTATE_CHARS,
  TRACEPARENT_CHARS,
  traceContextOf,
  type TraceContext,
} from '../protocol/trace-context.js';

const BUCKETS = 1024;

/** The most a record takes besides its payload (id of 200, topic of 128, a full back-off). */
export const MAX_RECORD_OVERHEAD =
  1 + 200 + 2 + 2 + 1 + 3 * 8 + 1 + 1 + 128 + 3 + TRACEPARENT_CHARS + MAX_TRACESTATE_CHARS;

export interface ClusterRecord {
  id: string;
  topic: string;
  maxAttempts: number;
  backoff: Backoff | undefined;
  payloadKind: number;
  payload: Uint8Array;
  /** The trace context of the call that scheduled the message, if it had one. */
  trace?: TraceContext | undefined;
}

/** A record to encode: its payload as bytes, or as text written in as UTF-8. */
export type RecordFields = Omit<ClusterRecord, 'payload'> & { payload: Uint8Array | string };

/**
 * An id's partition (FNV-1a modulo the partitions; a located id's own) and bucket (the bits
 * above: 1,024 buckets, each small enough for a store to keep in one compact hash).
 */
export function placeOf(id: string, partitions: number): { partition: number; bucket: number } {
  const hash = mix32(fnv1a(id));
  const located = parseLocated(id);
  const own = located !== undefined && located.partition < partitions;
  const bucket = Math.floor(hash / partitions) % BUCKETS;
  return { partition: own ? located.partition : hash % partitions, bucket };
}

// Numbers as tickwheel writes them: no leading zeros (an id names one message, one way).
const LOCATED = /^@(0|[1-9]\d{0,4})\.([nw]-?\d{1,16})\.(0|[1-9]\d{0,9})\.([A-Za-z0-9_-]{1,16})$/;

/** The parts of a located id, `@<partition>.<segment>.<index>.<tag>`; undefined for others. */
export function parseLocated(id: string) {
  if (id.charCodeAt(0) !== 64 /* @ */) return undefined;
  const m = LOCATED.exec(id);
  if (m === null) return undefined;
  return { partition: Number(m[1]), seg: m[2], index: Number(m[3]), tag: m[4] };
}

export function locatedId(partition: number, seg: string, index: number, tag: string): string {
  return `@${partition}.${seg}.${index}.${tag}`;
}

/** Characters of a located record's tag. */
export const TAG_LENGTH = 8;

const FIXED = 1;
const EXPONENTIAL = 2;
const HAS_JITTER = 4;
const HAS_MAX_DELAY = 8;
const HAS_TRACE = 16;

/** A message's record: with its id and bucket, or the located form when `located` is given. */
export function encodeRecord(
  record: RecordFields,
  bucket: number,
  located?: { tag: string; deliverAt: number },
): Buffer {
  const { topic, backoff, payload } = record;
  const due = located === undefined ? '' : String(located.deliverAt);
  const id = located === undefined ? record.id : '';
  if (id.length > 255 || topic.length > 255) {
    throw new TickwheelRangeError('ERR_TICKWHEEL_INVALID_ID', 'an id or topic longer than 255');
  }
  if (!(record.maxAttempts >= 1 && record.maxAttempts <= 0xffff)) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_MESSAGE',
      `maxAttempts must be from 1 to 65535 in a cluster, got ${record.maxAttempts}`,
    );
  }
  let flags = 0;
  const floats: number[] = [];
  if (backoff !== undefined) {
    flags = backoff.type === 'fixed' ? FIXED : EXPONENTIAL;
    floats.push(backoff.delayMs);
    if (backoff.jitter !== undefined) flags |= HAS_JITTER;
    if (backoff.maxDelayMs !== undefined) flags |= HAS_MAX_DELAY;
    for (const value of [backoff.jitter, backoff.maxDelayMs]) {
      if (value !== undefined) floats.push(value);
    }
  }
  const trace = record.trace;
  const tracestate = trace?.tracestate ?? '';
  const traceBytes = trace === undefined ? 0 : 3 + trace.traceparent.length + tracestate.length;
  if (trace !== undefined) flags |= HAS_TRACE;
  const head =
    located === undefined ? 1 + id.length + 2 : 1 + 1 + located.tag.length + 1 + due.length;
  const payloadBytes =
    typeof payload === 'string' ? Buffer.byteLength(payload, 'utf8') : payload.byteLength;
  const buf = Buffer.allocUnsafe(
    head + 2 + 1 + 8 * floats.length + 1 + 1 + topic.length + traceBytes + payloadBytes,
  );
  let at = 0;
  if (located === undefined) {
    buf[at++] = id.length;
    at += buf.write(id, at, 'latin1');
    at = buf.writeUInt16LE(bucket, at);
  } else {
    buf[at++] = 0;
    buf[at++] = located.tag.length;
    at += buf.write(located.tag, at, 'latin1');
    buf[at++] = due.length;
    at += buf.write(due, at, 'latin1');
  }
  at = buf.writeUInt16LE(record.maxAttempts, at);
  buf[at++] = flags;
  for (const value of floats) at = buf.writeDoubleLE(value, at);
  buf[at++] = record.payloadKind;
  buf[at++] = topic.length;
  at += buf.write(topic, at, 'latin1');
  if (trace !== undefined) {
    buf[at++] = trace.traceparent.length;
    at = buf.writeUInt16LE(tracestate.length, at);
    at += buf.write(trace.traceparent, at, 'latin1');
    at += buf.write(tracestate, at, 'latin1');
  }
  if (typeof payload === 'string') buf.write(payload, at, 'utf8');
  else buf.set(payload, at);
  return buf;
}

/** A record's parts; a located record's `id` is '' (its place makes it). */
export function decodeRecord(
  buf: Buffer,
): ClusterRecord & { bucket: number; tag?: string; deliverAt?: number } {
  try {
    let at = 0;
    const idLength = buf[at++];
    let id = '';
    let bucket = 0;
    let located: { tag: string; deliverAt: number } | undefined;
    if (idLength > 0) {
      id = buf.toString('latin1', at, (at += idLength));
      bucket = buf.readUInt16LE(at);
      at += 2;
    } else {
      const tag = buf.toString('latin1', at + 1, (at += 1 + buf[at]));
      const deliverAt = Number(buf.toString('latin1', at + 1, (at += 1 + buf[at])));
      located = { tag, deliverAt };
    }
    const maxAttempts = buf.readUInt16LE(at);
    at += 2;
    const flags = buf[at++];
    const double = () => buf.readDoubleLE((at += 8) - 8);
    let backoff: Backoff | undefined;
    if ((flags & 3) !== 0) {
      backoff = { type: (flags & 3) === FIXED ? 'fixed' : 'exponential', delayMs: double() };
      if (flags & HAS_JITTER) backoff.jitter = double();
      if (flags & HAS_MAX_DELAY) backoff.maxDelayMs = double();
    }
    const payloadKind = buf[at++];
    const topicLength = buf[at++];
    const topic = buf.toString('latin1', at, (at += topicLength));
    let trace: TraceContext | undefined;
    if (flags & HAS_TRACE) {
      const parentStart = at + 3;
      const stateStart = parentStart + buf[at];
      const stateEnd = stateStart + buf.readUInt16LE(at + 1);
      at = stateEnd;
      // One that does not parse is dropped: the message is whole without it.
      if (at <= buf.length) {
        trace = traceContextOf(
          buf.toString('latin1', parentStart, stateStart),
          buf.toString('latin1', stateStart, stateEnd),
        );
      }
    }
    if (at > buf.length || idLength === undefined)
      throw new TickwheelCorruptError('a cluster record ends before its fields do');
    return {
      id,
      topic,
      bucket,
      maxAttempts,
      backoff,
      payloadKind,
      payload: buf.subarray(at),
      trace,
      ...located,
    };
  } catch (err) {
    throw new TickwheelCorruptError(`a cluster record cannot be read: ${String(err)}`, [], {
      cause: err,
    });
  }
}
