/**
 * The W3C trace context a message carries, so its handler can continue the scheduler's trace:
 *
 *   traceparent  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01  (55 characters)
 *   tracestate   up to 32 comma-separated key=value members, at most 512 characters
 *
 * A malformed value is dropped, never an error (a tracing header must not fail a schedule): a
 * bad tracestate only itself, as the specification asks, a bad traceparent both.
 */

export interface TraceContext {
  /** Version 00. */
  traceparent: string;
  tracestate?: string;
}

/** Length of a version-00 traceparent, the only form stored. */
export const TRACEPARENT_CHARS = 55;
/** Longest tracestate kept (the W3C limit a vendor must propagate). */
export const MAX_TRACESTATE_CHARS = 512;
const MAX_TRACESTATE_MEMBERS = 32;

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
// Printable ASCII but for ',' and '=' in keys; values also exclude ',' and '='.
const MEMBER =
  /^[a-z0-9][a-z0-9_\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The version-00 form of a well-formed traceparent (a later version's extra fields dropped). */
export function checkTraceparent(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > MAX_TRACESTATE_CHARS) return undefined;
  const m = TRACEPARENT.exec(value);
  if (m === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return `00-${traceId}-${spanId}-${flags}`;
}

/** A tracestate as stored (members trimmed of optional spaces), or undefined if not well formed. */
export function checkTracestate(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > MAX_TRACESTATE_CHARS) return undefined;
  const members: string[] = [];
  for (const part of value.split(',')) {
    const member = part.trim();
    if (member === '') continue;
    if (!MEMBER.test(member) || members.length === MAX_TRACESTATE_MEMBERS) return undefined;
    members.push(member);
  }
  return members.length === 0 ? undefined : members.join(',');
}

/** The context to store from a traceparent and a tracestate as received, or undefined. */
export function traceContextOf(
  traceparent: unknown,
  tracestate?: unknown,
): TraceContext | undefined {
  const parent = checkTraceparent(traceparent);
  if (parent === undefined) return undefined;
  const state = checkTracestate(tracestate);
  return state === undefined ? { traceparent: parent } : { traceparent: parent, tracestate: state };
}

/** A stored context checked again (from disk, Valkey or a caller's object). */
export function checkTraceContext(value: unknown): TraceContext | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const given = value as Partial<TraceContext>;
  return traceContextOf(given.traceparent, given.tracestate);
}

/**
 * The context of an HTTP request's `traceparent` and `tracestate` headers, or undefined. A
 * repeated traceparent is invalid (the W3C specification says to ignore it); repeated tracestate
 * headers are one list.
 */
export function traceContextOfHeaders(
  headers: Record<string, string | string[] | undefined>,
): TraceContext | undefined {
  const { traceparent, tracestate } = headers;
  if (traceparent === undefined || Array.isArray(traceparent)) return undefined;
  return traceContextOf(traceparent, Array.isArray(tracestate) ? tracestate.join(',') : tracestate);
}
