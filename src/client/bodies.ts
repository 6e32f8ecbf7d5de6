/** The wire form of the client's calls: path segments, bodies, errors for what cannot be sent. */

import { randomUUID } from 'node:crypto';
import { TickwheelError, TickwheelRangeError, TickwheelTypeError } from '../errors.js';
import { MAX_BATCH, MAX_RECEIPT_LENGTH } from '../protocol/limits.js';
import { describe } from '../validate.js';
import type { ReceivedMessage } from '../queue/types.js';
import type { ScheduleBody, WireReceivedMessage } from '../protocol/wire.js';
import {
  checkId,
  checkRequest,
  checkSendable,
  dueTime,
  type ScheduleRequest,
} from '../queue/message.js';
import { messageOf } from './transport.js';

/**
 * A topic or id as a path segment. Only its type is checked here (the server checks the rest):
 * without this, `cancel(undefined)` would cancel a message whose id is "undefined". An id `.`
 * or `..` is refused as the embedded queue refuses it: URL normalisation would drop the segment
 * (`%2E` too), sending the request to another path.
 */
export function segment(value: unknown, what: 'topic' | 'id' | 'name'): string {
  if (what === 'id' && (value === '.' || value === '..')) checkId(value);
  if (typeof value !== 'string' || value === '') {
    throw new TickwheelTypeError(
      what === 'topic'
        ? 'ERR_TICKWHEEL_INVALID_TOPIC'
        : what === 'id'
          ? 'ERR_TICKWHEEL_INVALID_ID'
          : 'ERR_TICKWHEEL_INVALID_OPTION',
      `${what} must be a non-empty string, got ${describe(value)}`,
    );
  }
  return `/${encodeURIComponent(value)}`;
}

/**
 * The wire form of a message: bytes as base64, and an id (a UUID) for one that has none, so that
 * a retry finds the first rather than making a second (docs/http-api.md, Retries).
 */
export function toBody(message: ScheduleRequest, where = ''): ScheduleBody & { topic: string } {
  // The embedded queue's checks and errors, before anything is sent; the server checks again.
  checkSendable(message, Date.now(), where);
  const id = message.id ?? randomUUID();
  const bytes = message.payload instanceof Uint8Array ? message.payload : undefined;
  if (bytes === undefined) return { ...message, id };
  return {
    ...message,
    id,
    payload: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64'),
    payloadEncoding: 'base64',
  };
}

/** Whether JSON holds a field as it is: NaN and ±Infinity would be sent as null. */
function jsonNumber(value: unknown): boolean {
  return typeof value !== 'number' || Number.isFinite(value);
}

/**
 * A due time (schedule, reschedule, requeue) with a `delayMs` or `deliverAt` JSON cannot hold
 * (NaN, ±Infinity): refused with the embedded queue's ERR_TICKWHEEL_INVALID_DELAY.
 */
export function checkDueTime(when: unknown): void {
  if (typeof when !== 'object' || when === null) return;
  const { delayMs, deliverAt } = when as { delayMs?: unknown; deliverAt?: unknown };
  if (!jsonNumber(delayMs) || !jsonNumber(deliverAt)) dueTime(when, Date.now());
}

/**
 * The error for a message JSON cannot hold (a BigInt, a cycle): the embedded queue's for it (its
 * check, made only once JSON.stringify has failed), or else ERR_TICKWHEEL_INVALID_MESSAGE.
 */
export function refuseMessage(message: unknown, where: string, err: unknown): Error {
  try {
    checkRequest(message, Date.now(), Number.POSITIVE_INFINITY, where);
  } catch (refused) {
    if (refused instanceof TickwheelError) return refused;
  }
  return new TickwheelTypeError(
    'ERR_TICKWHEEL_INVALID_MESSAGE',
    `${where}a message must be JSON-serialisable: ${messageOf(err)}`,
    { cause: err },
  );
}

/** The error for a delay (reschedule, requeue) JSON cannot hold: the embedded queue's, as above. */
export function refuseDelay(when: unknown, what: string, err: unknown): Error {
  try {
    if (typeof when === 'object' && when !== null) dueTime(when, Date.now());
  } catch (refused) {
    if (refused instanceof TickwheelError) return refused;
  }
  return refuseOption(what, err);
}

export function sendable(value: unknown): boolean {
  try {
    return JSON.stringify(value) !== undefined;
  } catch {
    return false;
  }
}

/** The error for options JSON cannot hold (a BigInt, a cycle): ERR_TICKWHEEL_INVALID_OPTION. */
export function refuseOption(what: string, err: unknown): Error {
  return new TickwheelTypeError(
    'ERR_TICKWHEEL_INVALID_OPTION',
    `${what} must be JSON-serialisable: ${messageOf(err)}`,
    { cause: err },
  );
}

export function fromWire(message: WireReceivedMessage): ReceivedMessage {
  const { payloadEncoding, ...received } = message;
  if (payloadEncoding === 'base64' && typeof received.payload === 'string') {
    received.payload = Buffer.from(received.payload, 'base64');
  }
  return received;
}

/** An array of at most MAX_BATCH items: one request's worth. */
export function checkBatch(
  method: string,
  items: 'messages' | 'receipts',
  value: unknown,
): asserts value is readonly unknown[] {
  if (!Array.isArray(value)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_MESSAGE',
      `${method} takes an array of ${items}, got ${describe(value)}`,
    );
  }
  if (value.length > MAX_BATCH) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_MESSAGE',
      `${method} over HTTP takes at most ${MAX_BATCH} ${items} a call, got ${value.length}: split the array`,
    );
  }
}

/**
 * The indexes of the receipts worth sending: one no server can know (empty, or too long) is
 * answered false here, as the embedded queue answers it, rather than failing the rest with a 400.
 */
export function sendableReceipts(method: 'ackMany' | 'nackMany', receipts: unknown): number[] {
  checkBatch(method, 'receipts', receipts);
  const sent: number[] = [];
  for (let i = 0; i < receipts.length; i++) {
    const receipt: unknown = receipts[i];
    if (typeof receipt !== 'string') {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_MESSAGE',
        `receipts[${i}] must be the string receive() returned, got ${describe(receipt)}`,
      );
    }
    if (receipt !== '' && receipt.length <= MAX_RECEIPT_LENGTH) sent.push(i);
  }
  return sent;
}
