/**
 * How a pushed message is signed (docs/push.md), for the queue and for `verifyPush`: HMAC-SHA256
 * with the target's secret over timestamp, id, topic, attempt and deliver-at, each followed by
 * `\n`, then the body as sent. A timestamp too far from the receiver's clock is refused, so a
 * recording cannot be replayed.
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import { TickwheelError, TickwheelRangeError } from '../errors.js';
import { checkCallback, checkOptionsObject, describe, invalidOption } from '../validate.js';

export const PUSH_HEADER = Object.freeze({
  id: 'tickwheel-id',
  topic: 'tickwheel-topic',
  attempt: 'tickwheel-attempt',
  deliverAt: 'tickwheel-deliver-at',
  timestamp: 'tickwheel-timestamp',
  signature: 'tickwheel-signature',
});

/** How far a request's timestamp may be from the receiver's clock, by default: 5 minutes. */
export const DEFAULT_PUSH_TOLERANCE_SECONDS = 300;

/** A push request failed its check: unsigned, signed with another secret, or too old. */
export class PushSignatureError extends TickwheelError<'ERR_TICKWHEEL_PUSH_SIGNATURE'> {
  constructor(message: string) {
    super('ERR_TICKWHEEL_PUSH_SIGNATURE', message);
    this.name = 'PushSignatureError';
  }
}

/** What a signature covers besides the timestamp and the body. */
export interface SignedFields {
  id: string;
  topic: string;
  /** As the header says it: whole numbers in decimal. */
  attempt: number | string;
  deliverAt: number | string;
}

/** `v1=<hex>` for a request signed at `timestamp` (seconds). */
export function signPush(
  secret: string,
  timestamp: number,
  fields: SignedFields,
  body: Uint8Array | string,
): string {
  return `v1=${digest(secret, timestamp, fields, body).toString('hex')}`;
}

function digest(
  secret: string,
  timestamp: number,
  { id, topic, attempt, deliverAt }: SignedFields,
  body: Uint8Array | string,
): Buffer {
  return createHmac('sha256', secret)
    .update(`${timestamp}\n${id}\n${topic}\n${attempt}\n${deliverAt}\n`)
    .update(body)
    .digest();
}

/** What a verified push request says about its message. */
export interface PushDelivery {
  id: string;
  topic: string;
  attempt: number;
  /** When the message was due, ms since the Unix epoch. */
  deliverAt: number;
  /** When the request was signed, seconds since the Unix epoch. */
  timestamp: number;
}

/** Headers as Node gives them (lower-case names) or as a fetch Request does. */
export type PushHeaders =
  { get(name: string): string | null } | Record<string, string | string[] | undefined>;

export interface VerifyPushOptions {
  /** The push target's secret; several while it is being changed (any one may match). */
  secret: string | readonly string[];
  /** Seconds a timestamp may be from `now`; default 300. */
  toleranceSeconds?: number;
  /** The receiver's clock, ms since the Unix epoch; default Date.now. */
  now?: () => number;
}

export interface PushCheck {
  secrets: readonly string[];
  toleranceSeconds: number;
  now: () => number;
}

/** Checks the options of verifyPush (and pushListener, `who`): the receiver's mistakes. */
export function checkPushOptions(options: unknown, who: string): PushCheck {
  checkOptionsObject(options, `${who}: options`, '{ secret }');
  const { secret, toleranceSeconds, now } = options as Partial<VerifyPushOptions>;
  const secrets: unknown = typeof secret === 'string' ? [secret] : secret;
  if (
    !Array.isArray(secrets) ||
    secrets.length === 0 ||
    secrets.some((one) => typeof one !== 'string' || one === '')
  ) {
    throw invalidOption(
      `${who}: options.secret must be a non-empty string, or a non-empty array of them while a ` +
        `secret is being changed; got ${!Array.isArray(secrets) ? describe(secret) : secrets.length === 0 ? 'an empty array' : 'an array holding something else'}`,
    );
  }
  const tolerance = toleranceSeconds ?? DEFAULT_PUSH_TOLERANCE_SECONDS;
  if (typeof tolerance !== 'number' || !(tolerance >= 0)) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${who}: options.toleranceSeconds must be a number of 0 or more, got ${describe(tolerance)}`,
    );
  }
  if (now !== undefined) checkCallback(now, `${who}: options.now`);
  return { secrets: secrets as string[], toleranceSeconds: tolerance, now: now ?? Date.now };
}

/**
 * Checks a push request's signature over the raw `body` and its timestamp: returns what its
 * headers say, or throws PushSignatureError (answer 401). Arguments that cannot be a request at
 * all (no headers, a body already parsed) throw a type error.
 */
export function verifyPush(
  request: { headers: PushHeaders; body: Uint8Array | string },
  options: VerifyPushOptions,
): PushDelivery {
  const check = checkPushOptions(options, 'verifyPush');
  checkRequest(request);
  const signed = checkPushHeaders(request.headers, check);
  const given = signed.signatures
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1='))
    .map((part) => Buffer.from(part.slice(3), 'hex'));
  let match = false;
  for (const secret of check.secrets) {
    const expected = digest(secret, signed.timestamp, signed, request.body);
    for (const signature of given) {
      // Every comparison runs: how many matched must not show in the time taken.
      if (signature.length === expected.length && timingSafeEqual(signature, expected)) {
        match = true;
      }
    }
  }
  if (!match) {
    throw new PushSignatureError(
      'the signature does not match the body with any of the secrets given ' +
        '(was the body changed, parsed and re-serialised, or signed with another secret?)',
    );
  }
  const { id, topic, attempt, deliverAt, timestamp } = signed;
  return { id, topic, attempt: Number(attempt), deliverAt: Number(deliverAt), timestamp };
}

/**
 * The push headers as sent (signed as sent), all present and the timestamp (1 to 12 digits)
 * within the tolerance of the receiver's clock; else PushSignatureError. Needs no body, so a
 * receiver can refuse a request before reading it.
 */
export function checkPushHeaders(headers: PushHeaders, check: PushCheck) {
  const tolerance = check.toleranceSeconds;
  const names = Object.values(PUSH_HEADER);
  const values = names.map((name) => header(headers, name));
  if (values.includes(undefined)) {
    throw new PushSignatureError(
      `not a signed tickwheel push: the ${names.join(', ')} headers are all needed`,
    );
  }
  // In PUSH_HEADER's order.
  const [id, topic, attempt, deliverAt, stamp, signatures] = values as string[];
  if (!/^\d{1,12}$/.test(stamp)) {
    throw new PushSignatureError(`${PUSH_HEADER.timestamp} is not whole seconds: ${stamp}`);
  }
  const timestamp = Number(stamp);
  const now = check.now() / 1000;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new PushSignatureError(
      `${PUSH_HEADER.timestamp} ${timestamp} is more than ${tolerance} s from this clock ` +
        `(${Math.floor(now)}): a replayed request, or a clock that is off`,
    );
  }
  return { id, topic, attempt, deliverAt, timestamp, signatures };
}

function checkRequest(request: unknown): void {
  const headers = (request as { headers?: unknown } | null)?.headers;
  if (typeof request !== 'object' || request === null || typeof headers !== 'object' || !headers) {
    throw invalidOption(
      `verifyPush: request must be { headers, body }, the request's headers and its raw body; got ${describe(request)}${typeof request === 'object' && request !== null ? ' without headers' : ''}`,
    );
  }
  const { body } = request as { body?: unknown };
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
    throw invalidOption(
      `verifyPush: request.body must be the raw body as received (a string or bytes), got ${describe(body)}: a body already parsed (as JSON, say) cannot be checked`,
    );
  }
}

function header(headers: PushHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const value = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value.join(',') : value;
}
