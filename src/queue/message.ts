/** The message model: what a producer sends, how it is checked and encoded, how retries back off. */

import { randomBytes } from 'node:crypto';
import { TickwheelRangeError, TickwheelTypeError } from '../errors.js';
import { describe, invalidOption } from '../validate.js';
import type { Backoff } from '../protocol/model.js';
import { checkTraceContext, type TraceContext } from '../protocol/trace-context.js';

export type { MessageStatus, Backoff } from '../protocol/model.js';

/** A message to schedule; its payload any JSON value, or bytes (Buffer / Uint8Array). */
export interface ScheduleRequest<Payload = unknown> {
  topic: string;
  payload: Payload;
  /** Delay from now, in ms. One of delayMs / deliverAt; neither means "now". */
  delayMs?: number;
  deliverAt?: number;
  /** Dedup key: scheduling the same id while it is pending returns the pending message. */
  id?: string;
  /** Deliveries before the message goes to the dead-letter topic. Default 5. */
  maxAttempts?: number;
  backoff?: Backoff;
  /** The W3C trace context to store with it. Default: the active OpenTelemetry context. */
  trace?: TraceContext;
}

/** Payload kinds on disk: JSON text, or raw bytes given as a Buffer / Uint8Array. */
export const PAYLOAD_JSON = 0;
export const PAYLOAD_BYTES = 1;

export interface MessageState {
  id: string;
  topic: string;
  deliverAt: number;
  attempts: number;
  maxAttempts: number;
  backoff: Backoff | undefined;
  payloadKind: number;
  /** The encoded payload, when in memory; stores may drop it and read it back by `ref`. */
  payload: Uint8Array | undefined;
  /**
   * A short JSON payload as text (then `payload` is undefined) while held: the store encodes it
   * where it keeps it, and a receive parses the text; no bytes made only to be decoded.
   */
  payloadText?: string | undefined;
  /** The store's own reference to the message's payload (a log position for the file store). */
  ref: number;
  /**
   * The store's reference to the record of the current delivery (Store.handOut), else undefined.
   * Not NaN or -1 before: a field holding only numbers keeps a boxed double in every message
   * (one more heap object each, held or not), and one that goes from small integers to doubles
   * changes the messages' hidden class.
   */
  handOutRef?: number | undefined;
  /** Why its latest delivery failed; durable with a dead letter, in memory for a retry. */
  lastError?: string | undefined;
  /** The trace context of the call that scheduled it, kept durably (docs/observability.md). */
  trace?: TraceContext | undefined;
}

export const TOPIC_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;
export const DEFAULT_MAX_ATTEMPTS = 5;
/** A due time over 200 years ahead is refused: almost certainly a unit mistake. */
export const MAX_DELAY_MS = 200 * 365.25 * 24 * 3600 * 1000;

/** 2001-09-09T01:46:40Z: a deliverAt below it, against a wall clock, is taken for seconds. */
const EARLIEST_DELIVER_AT = 1e12;

/** The last topic that passed checkTopic: producers tend to repeat theirs. */
let lastTopic = '';

export function checkTopic(topic: unknown): string {
  if (topic === lastTopic && topic !== '') return topic;
  if (typeof topic !== 'string' || !TOPIC_PATTERN.test(topic)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_TOPIC',
      `topic must be 1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit; got ${describe(topic)}`,
    );
  }
  lastTopic = topic;
  return topic;
}

/**
 * An id: also a path segment over HTTP, where `.` and `..` would be taken for the directory and
 * its parent (URL normalisation), so that no client could reach the message; both are refused.
 */
export function checkId(id: unknown): string {
  if (typeof id !== 'string' || !ID_PATTERN.test(id) || id === '.' || id === '..') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_ID',
      `id must be 1-200 characters of letters, digits, '.', '_', ':', '@' or '-', other than '.' and '..'; got ${describe(id)}`,
    );
  }
  return id;
}

export function invalidMessage(message: string): TickwheelTypeError {
  return new TickwheelTypeError('ERR_TICKWHEEL_INVALID_MESSAGE', message);
}

function invalidDelay(message: string): TickwheelRangeError {
  return new TickwheelRangeError('ERR_TICKWHEEL_INVALID_DELAY', message);
}

/** An object with only the `allowed` fields (a typo must not pass as "not set"). */
export function fieldsOf(
  value: unknown,
  allowed: readonly string[],
  what: string,
  example: string,
): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidOption(`${what} must be an object such as ${example}, got ${describe(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw invalidOption(
        `unknown field ${JSON.stringify(key)} of ${what}: the fields are ${allowed.join(', ')}`,
      );
    }
  }
  return value as Record<string, unknown>;
}

/** Resolves delayMs / deliverAt into a due time (epoch ms), refusing nonsense. */
export function dueTime(
  when: { delayMs?: unknown; deliverAt?: unknown },
  now: number,
  required = false,
): number {
  const { delayMs, deliverAt } = when;
  if (delayMs !== undefined && deliverAt !== undefined) {
    throw invalidMessage('give either delayMs or deliverAt, not both');
  }
  if (deliverAt !== undefined) {
    if (typeof deliverAt !== 'number' || !Number.isFinite(deliverAt) || deliverAt < 0) {
      throw invalidDelay(
        `deliverAt must be a Unix time in milliseconds, got ${describe(deliverAt)}`,
      );
    }
    // Against a wall clock, seconds (delivered at once); a ManualClock may start anywhere.
    if (deliverAt < EARLIEST_DELIVER_AT && now >= EARLIEST_DELIVER_AT) {
      throw invalidDelay(
        `deliverAt ${deliverAt} is before 2001-09-09: it looks like seconds; deliverAt is a Unix time in milliseconds (${deliverAt * 1000} if it was seconds)`,
      );
    }
    if (deliverAt - now > MAX_DELAY_MS) {
      throw invalidDelay(
        `deliverAt ${deliverAt} is more than 200 years ahead; is it in seconds or microseconds?`,
      );
    }
    return Math.floor(deliverAt);
  }
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isFinite(delayMs)) {
      throw invalidDelay(
        `delayMs must be a finite number of milliseconds, got ${describe(delayMs)}`,
      );
    }
    if (delayMs > MAX_DELAY_MS) {
      throw invalidDelay(`delayMs ${delayMs} is more than 200 years`);
    }
    return Math.ceil(now + Math.max(0, delayMs));
  }
  if (required) {
    throw invalidMessage('give delayMs or deliverAt');
  }
  return Math.ceil(now);
}

/** A reschedule's due time: `{}` or a bare number would silently mean "now", so refused. */
export function rescheduleTime(when: unknown, now: number): number {
  if (typeof when !== 'object' || when === null) {
    throw invalidMessage(`give { delayMs } or { deliverAt }, got ${describe(when)}`);
  }
  return dueTime(when, now, true);
}

export function checkBackoff(backoff: unknown): Backoff | undefined {
  if (backoff === undefined) return undefined;
  const b = backoff as Backoff;
  if (
    typeof backoff !== 'object' ||
    backoff === null ||
    (b.type !== 'fixed' && b.type !== 'exponential') ||
    typeof b.delayMs !== 'number' ||
    !Number.isFinite(b.delayMs) ||
    b.delayMs < 0 ||
    (b.jitter !== undefined &&
      (typeof b.jitter !== 'number' || !(b.jitter >= 0 && b.jitter <= 1))) ||
    !(b.delayMs <= MAX_DELAY_MS) ||
    (b.maxDelayMs !== undefined &&
      (typeof b.maxDelayMs !== 'number' || !(b.maxDelayMs >= 0 && b.maxDelayMs <= MAX_DELAY_MS)))
  ) {
    throw invalidMessage(
      `backoff must be { type: 'fixed' | 'exponential', delayMs: 0..${MAX_DELAY_MS}, jitter?: 0..1, maxDelayMs?: 0..${MAX_DELAY_MS} }`,
    );
  }
  checkFields(backoff, BACKOFF_FIELDS, 'backoff');
  const result: Backoff = { type: b.type, delayMs: b.delayMs };
  if (b.jitter !== undefined) result.jitter = b.jitter;
  if (b.maxDelayMs !== undefined) result.maxDelayMs = b.maxDelayMs;
  return result;
}

export function checkMaxAttempts(value: unknown): number {
  if (value === undefined) return DEFAULT_MAX_ATTEMPTS;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 10_000) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_MESSAGE',
      `maxAttempts must be an integer from 1 to 10000, got ${describe(value)}`,
    );
  }
  return value;
}

/** Wait before the next delivery after `attempts` deliveries failed. */
export function retryDelay(
  backoff: Backoff | undefined,
  attempts: number,
  random = Math.random,
): number {
  if (backoff === undefined) return Math.min(1000 * 2 ** Math.max(0, attempts - 1), 3_600_000);
  const cap = backoff.maxDelayMs ?? 86_400_000;
  const base =
    backoff.type === 'fixed' ? backoff.delayMs : backoff.delayMs * 2 ** Math.max(0, attempts - 1);
  const jitter = backoff.jitter ?? (backoff.type === 'exponential' ? 0.2 : 0);
  const spread = base * jitter * (random() * 2 - 1);
  return Math.max(0, Math.min(cap, Math.round(base + spread)));
}

const decoder = new TextDecoder();

/** JSON payloads up to this many characters stay text until the store writes them. */
const TEXT_PAYLOAD_CHARS = 4096;

/** A payload's kind and bytes, or (short JSON) its text: see MessageState.payloadText. */
type EncodedPayload = { kind: number; bytes: Uint8Array | undefined; text: string | undefined };

/** Checks and encodes a payload: bytes as they are, else JSON (`text` when short). */
export function encodePayload(payload: unknown, maxBytes: number): EncodedPayload {
  if (payload instanceof Uint8Array) {
    checkPayloadSize(payload.byteLength, maxBytes);
    return { kind: PAYLOAD_BYTES, bytes: payload, text: undefined };
  }
  checkNotLossy(payload);
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (err) {
    // JSON.stringify runs out of stack on a payload nested some thousands deep.
    const why = err instanceof RangeError ? 'it is nested too deeply' : (err as Error).message;
    throw invalidMessage(`payload must be JSON-serialisable or bytes: ${why}`);
  }
  if (text === undefined) {
    throw invalidMessage(`payload must be JSON-serialisable or bytes, got ${describe(payload)}`);
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit (JSON.stringify escapes lone surrogates).
  if (text.length * 3 > maxBytes) checkPayloadSize(Buffer.byteLength(text, 'utf8'), maxBytes);
  if (text.length <= TEXT_PAYLOAD_CHARS) return { kind: PAYLOAD_JSON, bytes: undefined, text };
  return { kind: PAYLOAD_JSON, bytes: Buffer.from(text, 'utf8'), text: undefined };
}

/**
 * Refuses a payload that JSON would turn into something else without a word: an ArrayBuffer, a
 * DataView or a typed array other than Uint8Array ({} or an object of indexes), a Map or a Set
 * ({}). Only the payload itself is looked at, not what it holds.
 */
export function checkNotLossy(payload: unknown): void {
  if (typeof payload !== 'object' || payload === null) return;
  const proto: unknown = Object.getPrototypeOf(payload);
  if (proto === Object.prototype || proto === Array.prototype || proto === null) return;
  let what: string | undefined;
  if (typeof (payload as { toJSON?: unknown }).toJSON === 'function') return;
  if (payload instanceof ArrayBuffer || payload instanceof SharedArrayBuffer) {
    what = `an ${payload.constructor.name}: pass new Uint8Array(buffer) to send its bytes`;
  } else if (ArrayBuffer.isView(payload)) {
    what =
      Object.prototype.toString.call(payload) === '[object Uint8Array]'
        ? 'a Uint8Array of another realm (a vm context): pass Buffer.from(it)'
        : `a ${payload.constructor.name}: bytes go as a Uint8Array or a Buffer`;
  } else if (payload instanceof Map || payload instanceof Set) {
    what = `a ${payload.constructor.name}, which JSON makes {}: convert it (Object.fromEntries(map), [...set])`;
  }
  if (what !== undefined) throw invalidMessage(`payload is ${what}`);
}

function checkPayloadSize(bytes: number, maxBytes: number): void {
  if (bytes > maxBytes) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_PAYLOAD_TOO_LARGE',
      `payload is ${bytes} bytes; the limit (maxPayloadBytes) is ${maxBytes}`,
    );
  }
}

/** The payload's bytes, encoding `payloadText` if that is how it is held. */
export function payloadBytes(message: MessageState): Uint8Array | undefined {
  if (message.payload !== undefined || message.payloadText === undefined) return message.payload;
  return Buffer.from(message.payloadText, 'utf8');
}

/** A payload as it is held: its encoded bytes, or (JSON only) its text (see payloadText). */
export function decodePayload(kind: number, held: Uint8Array | string): unknown {
  if (typeof held === 'string') return JSON.parse(held);
  if (kind === PAYLOAD_BYTES) return Buffer.from(held.buffer, held.byteOffset, held.byteLength);
  return JSON.parse(decoder.decode(held));
}

/** The start of a decoded payload, for people looking at it: JSON text, or base64 for bytes. */
export function payloadPreview(
  payload: unknown,
  maxChars: number,
): { preview: string; truncated: boolean } {
  const text =
    payload instanceof Uint8Array
      ? Buffer.from(payload).toString('base64')
      : (JSON.stringify(payload) ?? 'undefined');
  return { preview: text.slice(0, maxChars), truncated: text.length > maxChars };
}

/** The payload held in memory, as bytes or text; undefined when it is only in the store. */
export function heldPayload(message: MessageState): Uint8Array | string | undefined {
  return message.payload ?? message.payloadText;
}

export function storedBytes(held: Uint8Array | string): number {
  return typeof held === 'string' ? Buffer.byteLength(held, 'utf8') : held.byteLength;
}

/** Random per process, so ids made by different processes (or restarts) never meet. */
const idPrefix = randomBytes(6).toString('hex');
let idCounter = 0;
let idMs = -1;
let idTime = '';

/** A fresh message id: sortable by creation time, unique across processes, cheap to make. */
export function newMessageId(now: number): string {
  idCounter = (idCounter + 1) % Number.MAX_SAFE_INTEGER;
  const ms = Math.floor(now);
  if (ms !== idMs) {
    idMs = ms;
    idTime = `${ms.toString(36).padStart(9, '0')}-${idPrefix}-`;
  }
  return idTime + idCounter.toString(36);
}

/** Where an id made by newMessageId has its number: after `<time>-<idPrefix>-`. */
const ID_NUMBER_AT = 9 + 1 + idPrefix.length + 1;

/**
 * The number of an id made by newMessageId in this process (unique among them), or -1 for any
 * other id. An id given by a user may look the same: callers compare the whole id too.
 */
export function ownIdNumber(id: string): number {
  if (id.charCodeAt(ID_NUMBER_AT - 1) !== 45 /* - */ || !id.startsWith(idPrefix, 10)) return -1;
  return base36(id, ID_NUMBER_AT, id.length);
}

/** Numbers of at most this many base-36 digits are read exactly (36^10 < 2^53). */
const MAX_BASE36_DIGITS = 10;

/**
 * The base-36 number (lower-case digits) in `text[from, to)`, or -1 when that is empty, has
 * another character or a leading zero, or is longer than MAX_BASE36_DIGITS.
 */
export function base36(text: string, from: number, to: number): number {
  if (to <= from || to - from > MAX_BASE36_DIGITS) return -1;
  if (to - from > 1 && text.charCodeAt(from) === 48) return -1;
  let value = 0;
  for (let at = from; at < to; at++) {
    const c = text.charCodeAt(at);
    const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 122 ? c - 87 : -1;
    if (digit < 0) return -1;
    value = value * 36 + digit;
  }
  return value;
}

/** The reason (lastError) of a delivery whose visibility timeout ran out, on every backend. */
export const VISIBILITY_REASON = 'visibility timeout: not acknowledged in time';

/** The reason kept (lastError) for a nack that gave none: the same text on every backend. */
export const NACK_REASON = 'nacked';

export const MAX_REASON_CHARS = 500;

/** A failure as the short text kept with the message (lastError). */
export function reasonOf(err: unknown): string {
  const text =
    err instanceof Error
      ? `${err.name}: ${err.message}`
      : typeof err === 'string'
        ? err
        : String(describe(err));
  return clipReason(text);
}

/** A text cut to `max` characters (MAX_REASON_CHARS for a reason), the last an ellipsis when cut. */
export function clipReason(text: string, max = MAX_REASON_CHARS): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A schedule request, checked, with its payload encoded (see encodePayload). */
export interface CheckedRequest {
  id: string;
  topic: string;
  deliverAt: number;
  maxAttempts: number;
  backoff: Backoff | undefined;
  payload: EncodedPayload;
  trace: TraceContext | undefined;
}

const REQUEST_FIELDS = new Set([
  'topic',
  'payload',
  'delayMs',
  'deliverAt',
  'id',
  'maxAttempts',
  'backoff',
  'trace',
]);

const BACKOFF_FIELDS = new Set(['type', 'delayMs', 'jitter', 'maxDelayMs']);
const TRACE_FIELDS = new Set(['traceparent', 'tracestate']);

/** Refuses unknown fields (`{ delay: 5000 }` would be due now); for-in: no array per message. */
function checkFields(value: object, fields: ReadonlySet<string>, what: string): void {
  for (const key in value) {
    if (!fields.has(key) && Object.hasOwn(value, key)) {
      throw invalidMessage(
        `${what} has no field ${JSON.stringify(key)} (its fields: ${[...fields].join(', ')})`,
      );
    }
  }
}

/**
 * A trace context: an object whose fields, when there, are strings (a field of another name is
 * refused, as a misspelt one would drop the trace). Their values are checked by
 * checkTraceContext, which drops a malformed or missing traceparent: a tracing header never
 * fails a schedule.
 */
function checkTrace(value: unknown): TraceContext | undefined {
  const given = value as Partial<TraceContext>;
  if (
    typeof value !== 'object' ||
    value === null ||
    Array.isArray(value) ||
    (given.traceparent !== undefined && typeof given.traceparent !== 'string') ||
    (given.tracestate !== undefined && typeof given.tracestate !== 'string')
  ) {
    throw invalidMessage(
      `trace must be { traceparent?: string, tracestate?: string }, got ${describe(value)}`,
    );
  }
  checkFields(value, TRACE_FIELDS, 'trace');
  return checkTraceContext(value);
}

/**
 * Checks a schedule request; an id not given is '' (the backend makes it when it writes the
 * message). `where` goes in front of an error's message (which message of a batch).
 */
export function checkRequest(
  request: unknown,
  now: number,
  maxPayloadBytes: number,
  where = '',
): CheckedRequest {
  return checkWith(request, now, where, (payload) => encodePayload(payload, maxPayloadBytes));
}

/**
 * Refuses, with checkRequest's error, a request checkRequest would refuse for anything but its
 * payload's size or a payload JSON.stringify throws on; encodes nothing. What a client checks
 * before sending.
 */
export function checkSendable(request: unknown, now: number, where = ''): void {
  checkWith(request, now, where, checkPayloadKind);
}

/** A payload encodePayload refuses whatever its size, short of JSON.stringify throwing. */
function checkPayloadKind(payload: unknown): void {
  if (payload instanceof Uint8Array) return;
  checkNotLossy(payload);
  if (payload === undefined || typeof payload === 'function' || typeof payload === 'symbol') {
    throw invalidMessage(`payload must be JSON-serialisable or bytes, got ${describe(payload)}`);
  }
}

function checkWith<P>(
  request: unknown,
  now: number,
  where: string,
  payload: (value: unknown) => P,
): Omit<CheckedRequest, 'payload'> & { payload: P } {
  if (typeof request !== 'object' || request === null) {
    throw invalidMessage(`${where}a message must be an object, got ${describe(request)}`);
  }
  const given = request as ScheduleRequest;
  try {
    checkFields(given, REQUEST_FIELDS, 'a message');
    return {
      topic: checkTopic(given.topic),
      deliverAt: dueTime(given, now),
      maxAttempts: checkMaxAttempts(given.maxAttempts),
      backoff: checkBackoff(given.backoff),
      payload: payload(given.payload),
      id: given.id !== undefined ? checkId(given.id) : '',
      trace: given.trace === undefined ? undefined : checkTrace(given.trace),
    };
  } catch (err) {
    if (where !== '' && err instanceof Error) err.message = where + err.message;
    throw err;
  }
}
