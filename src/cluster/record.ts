/**
 * A message as the cluster stores it in a segment (see library.ts): the parts that never change
 * while the message lives. Its status, due time and attempts are in its id's state instead.
 *
 *   idLength u8 | id | bucket u16 | maxAttempts u16 | backoff u8 | [delayMs f64]
 *   [jitter f64] [maxDelayMs f64] | payloadKind u8 | topicLength u8 | topic | payload
 *
 * Little-endian. The first three fields are read by the Valkey functions (the id and its bucket
 * to find the state, maxAttempts to decide between a retry and a dead letter), so they come first
 * and never move. `backoff` is 0 (none), 1 (fixed) or 2 (exponential), plus 4 when a jitter
 * follows and 8 when a maxDelayMs follows; the f64s are present only for a back-off. Ids and
 * topics are ASCII (their patterns allow nothing else). A message with a 16-character id, a
 * 7-character topic and no back-off costs 30 bytes besides its payload.
 *
 * Which partition and bucket an id belongs to comes from one FNV-1a hash of it: partition from
 * the hash modulo the partition count, bucket from the bits above (1,024 buckets, each a small
 * hash that Valkey keeps in its compact encoding while it holds under 128 ids).
 */

import { TickwheelCorruptError, TickwheelRangeError } from '../errors.js';
import type { Backoff } from '../queue/message.js';
import { fnv1a, mix32 } from './rendezvous.js';

export const BUCKETS = 1024;

/** The most a record can take besides its payload (id of 200, topic of 128, a full back-off). */
export const MAX_RECORD_OVERHEAD = 1 + 200 + 2 + 2 + 1 + 3 * 8 + 1 + 1 + 128;

export interface ClusterRecord {
  id: string;
  topic: string;
  maxAttempts: number;
  backoff: Backoff | undefined;
  payloadKind: number;
  payload: Uint8Array;
}

/** The partition (of `partitions`) and the id bucket of an id. */
export function placeOf(id: string, partitions: number): { partition: number; bucket: number } {
  const hash = mix32(fnv1a(id));
  return { partition: hash % partitions, bucket: Math.floor(hash / partitions) % BUCKETS };
}

const FIXED = 1;
const EXPONENTIAL = 2;
const HAS_JITTER = 4;
const HAS_MAX_DELAY = 8;

export function encodeRecord(record: ClusterRecord, bucket: number): Buffer {
  const { id, topic, backoff, payload } = record;
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
  const buf = Buffer.allocUnsafe(
    1 + id.length + 2 + 2 + 1 + 8 * floats + 1 + 1 + topic.length + payload.byteLength,
  );
  let at = 0;
  buf[at++] = id.length;
  at += buf.write(id, at, 'latin1');
  at = buf.writeUInt16LE(bucket, at);
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
  buf.set(payload, at);
  return buf;
}

export function decodeRecord(buf: Buffer): ClusterRecord & { bucket: number } {
  try {
    let at = 0;
    const idLength = buf[at++];
    const id = buf.toString('latin1', at, (at += idLength));
    const bucket = buf.readUInt16LE(at);
    const maxAttempts = buf.readUInt16LE(at + 2);
    at += 4;
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
    if (at > buf.length || idLength === undefined) throw new RangeError('short record');
    return { id, topic, bucket, maxAttempts, backoff, payloadKind, payload: buf.subarray(at) };
  } catch (err) {
    throw new TickwheelCorruptError(`a cluster record cannot be read: ${String(err)}`, [], {
      cause: err,
    });
  }
}
