/**
 * What the crash-harness worker (worker.mjs) and runner (scripts/crash.mjs) share: the queue
 * geometry, the self-checking payload format and a seeded PRNG.
 */

import { createHash } from 'node:crypto';
import { Buffer } from 'node:buffer';

export const TOPICS = ['crash.a', 'crash.b', 'crash.c'];
/** The same near-horizon geometry in every process, so messages go through the window index. */
export const HORIZON_MS = 1000;
export const WINDOW_MS = 250;
export const MAX_DELAY_MS = 3000;

/** First 32 hex characters of sha256. */
export function digest(data) {
  return createHash('sha256').update(data).digest('hex').slice(0, 32);
}

/**
 * Checks a received payload. JSON payloads are { t, r, h } with h = digest(`${t}:${r}`); byte
 * payloads are 16 bytes of digest followed by the bytes it covers.
 */
export function verifyPayload(payload) {
  if (payload instanceof Uint8Array) {
    if (payload.byteLength < 16) return { ok: false, hash: '-' };
    const head = Buffer.from(payload.buffer, payload.byteOffset, 16).toString('hex');
    const rest = payload.subarray(16);
    return { ok: digest(rest) === head, hash: head };
  }
  if (
    typeof payload === 'object' &&
    payload !== null &&
    typeof payload.t === 'string' &&
    typeof payload.r === 'string' &&
    typeof payload.h === 'string'
  ) {
    return { ok: digest(`${payload.t}:${payload.r}`) === payload.h, hash: payload.h };
  }
  return { ok: false, hash: '-' };
}

/** A seeded generator, so a cycle's choices can be replayed from its seed. */
export { seededRandom as prng } from '../support/random.mjs';
