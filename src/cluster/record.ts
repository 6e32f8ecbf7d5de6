/**
 * A message as the cluster stores it in a segment (see lua/states.lua): the parts that never change
 * while the message lives. Its status, due time and attempts are in its id's state instead.
 *
 *   idLength u8 | id | bucket u16 | maxAttempts u16 | backoff u8 | [delayMs f64]
 *   [jitter f64] [maxDelayMs f64] | payloadKind u8 | topicLength u8 | topic | [trace] | payload
 *
 * Little-endian. The first three fields are read by the Valkey functions (the id and its bucket
 * to find the state, maxAttempts to decide between a retry and a dead letter), so they come first
 * and never move. `backoff` is 0 (none), 1 (fixed) or 2 (exponential), plus 4 when a jitter
 * follows and 8 when a maxDelayMs follows; the f64s are present only for a back-off. 16 in
 * `backoff` says the message's W3C trace context (protocol/trace-context.ts) follows the topic:
 * traceparentLength u8 | tracestateLength u16 | traceparent | tracestate, ASCII; the functions
 * never read past the first fields, so a record with one is stored and moved like any other. Ids and
 * topics are ASCII (their patterns allow nothing else). A message with a 16-character id, a
 * 7-character topic and no back-off costs 30 bytes besides its payload.
 *
 * Which partition and bucket an id belongs to comes from one FNV-1a hash of it: partition from
 * the hash modulo the partition count, bucket from the bits above (1,024 buckets, each a small
 * hash that Valkey keeps in its compact encoding while it holds under 128 ids).
 *
 * A message scheduled without an id gets a *located* id, made by tw_schedule from where its
 * record went: `@<partition>.<segment>.<index>.<tag>` (for instance `@12.w29612.4081.Kx3_a9Qb`).
 * Its record carries no id and needs no id state while it waits at that place, so scheduling it
 * costs one list element and nothing more (docs/cluster.md, "Located ids"):
 *
 *   0 u8 | tagLength u8 | tag | dueLength u8 | deliverAt (decimal) | maxAttempts u16 | backoff
 *   ... (as above from backoff on)
 *
 * The tag (random, from the producer) tells the record from another one that a window segment
 * made anew holds at the same index. The partition of a located id is the one it names; ids
 * that users give cannot start with '@' in a cluster.
 */

import { TickwheelCorruptError, TickwheelRangeError } from '../errors.js';
import type { Backoff } from '../queue/message.js';
import { fnv1a, mix32 } from './rendezvous.js';
import {
  MAX_TRACESTATE_CHARS,
  TRACEPARENT_CHARS,
  checkTraceContext,
  type TraceContext,
} from '../protocol/trace-context.js';

export const BUCKETS = 1024;

/** The most a record can take besides its payload (id of 200, topic of 128, a full back-off). */
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

/** A record to encode: its payload as bytes, or as text written in as UTF-8 (no copy). */
export type RecordFields = Omit<ClusterRecord, 'payload'> & { payload: Uint8Array | string };

/** The partition (of `partitions`) and the id bucket of an id. */
export function placeOf(id: string, partitions: number): { partition: number; bucket: number } {
  const hash = mix32(fnv1a(id));
  const located = parseLocated(id);
  return {
    partition:
      located !== undefined && located.partition < partitions
        ? located.partition
        : hash % partitions,
    bucket: Math.floor(hash / partitions) % BUCKETS,
  };
}

// Numbers as tickwheel writes them: no leading zeros (an id names one message, one way).
const LOCATED = /^@(0|[1-9]\d{0,4})\.([nw]-?\d{1,16})\.(0|[1-9]\d{0,9})\.([A-Za-z0-9_-]{1,16})$/;

/** The parts of a located id (see above); undefined for any other id. */
export function parseLocated(
  id: string,
): { partition: number; seg: string; index: number; tag: string } | undefined {
  if (id.charCodeAt(0) !== 64 /* @ */) return undefined;
  const m = LOCATED.exec(id);
  if (m === null) return undefined;
  return { partition: Number(m[1]), seg: m[2], index: Number(m[3]), tag: m[4] };
}

/** The located id of the record at `index` of segment `seg` of `partition` with `tag`. */
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

/**
 * The record of a message: with its id and bucket, or, when `located` is given, the located
 * form (no id; the tag and due time instead).
 */
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
  let floats = 0;
  if (backoff !== undefined) {
    flags = backoff.type === 'fixed' ? FIXED : EXPONENTIAL;
    floats = 1;
    if (backoff.jitter !== undefined) {
      flags |= HAS_JITTER;
      floats++;
    }
    if (backoff.maxDelayMs !== undefined) {
      flags |= HAS_MAX_DELAY;
      floats++;
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
    head + 2 + 1 + 8 * floats + 1 + 1 + topic.length + traceBytes + payloadBytes,
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
  if (backoff !== undefined) {
    at = buf.writeDoubleLE(backoff.delayMs, at);
    if (backoff.jitter !== undefined) at = buf.writeDoubleLE(backoff.jitter, at);
    if (backoff.maxDelayMs !== undefined) at = buf.writeDoubleLE(backoff.maxDelayMs, at);
  }
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

/**
 * A record's parts. A located record has no id in it: `id` is '' and `tag` and `deliverAt`
 * are set (its id is the one its place makes, which the caller knows).
 */
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
    let backoff: Backoff | undefined;
    if ((flags & 3) !== 0) {
      backoff = {
        type: (flags & 3) === FIXED ? 'fixed' : 'exponential',
        delayMs: buf.readDoubleLE(at),
      };
      at += 8;
      if (flags & HAS_JITTER) {
        backoff.jitter = buf.readDoubleLE(at);
        at += 8;
      }
      if (flags & HAS_MAX_DELAY) {
        backoff.maxDelayMs = buf.readDoubleLE(at);
        at += 8;
      }
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
        trace = checkTraceContext({
          traceparent: buf.toString('latin1', parentStart, stateStart),
          tracestate:
            stateStart === stateEnd ? undefined : buf.toString('latin1', stateStart, stateEnd),
        });
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
