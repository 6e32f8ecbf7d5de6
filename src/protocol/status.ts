/**
 * The HTTP status of every error code: a code without one does not compile. 4xx: the caller can
 * change something; 503: the server cannot do it now; 500: codes the server never raises.
 */

import type { TickwheelErrorCode } from '../errors.js';

export const HTTP_STATUS: Readonly<Record<TickwheelErrorCode, number>> = {
  // Timers and the argument checks of every layer.
  ERR_TICKWHEEL_INVALID_DELAY: 400,
  ERR_TICKWHEEL_INVALID_CALLBACK: 400,
  ERR_TICKWHEEL_INVALID_OPTION: 400,
  ERR_TICKWHEEL_MAX_PENDING: 503,
  ERR_TICKWHEEL_CAPACITY: 503,
  ERR_TICKWHEEL_CLOSED: 503,
  ERR_TICKWHEEL_TIMER_STOPPED: 500,
  ERR_TICKWHEEL_REENTRANT: 500,
  ABORT_ERR: 500,

  // Patterns.
  ERR_TICKWHEEL_TIMEOUT: 503,
  ERR_TICKWHEEL_DUPLICATE_ID: 409,
  ERR_TICKWHEEL_LEASE_LOST: 500,

  // The queue refusing a message.
  ERR_TICKWHEEL_INVALID_MESSAGE: 400,
  ERR_TICKWHEEL_INVALID_TOPIC: 400,
  ERR_TICKWHEEL_INVALID_ID: 400,
  ERR_TICKWHEEL_PAYLOAD_TOO_LARGE: 413,
  ERR_TICKWHEEL_EVENTS_LOST: 503,

  // The store: a record too large is the caller's; the rest is the disk, the data or a bug.
  ERR_TICKWHEEL_RECORD_TOO_LARGE: 413,
  ERR_TICKWHEEL_LOCKED: 423,
  ERR_TICKWHEEL_LOCK_LOST: 503,
  ERR_TICKWHEEL_IO: 503,
  ERR_TICKWHEEL_CORRUPT: 503,
  ERR_TICKWHEEL_FORMAT: 503,
  ERR_TICKWHEEL_INVALID_RECORD: 503,
  ERR_TICKWHEEL_INVALID_POSITION: 503,
  ERR_TICKWHEEL_SEGMENT_ACTIVE: 503,
  ERR_TICKWHEEL_INVALID_STATE: 503,
  ERR_TICKWHEEL_SNAPSHOT_REJECTED: 503,
  ERR_TICKWHEEL_NOT_DURABLE: 503,
  ERR_TICKWHEEL_UNAVAILABLE: 503,
  ERR_TICKWHEEL_NO_REPLICA: 503,
  ERR_TICKWHEEL_DATA_LOST: 503,
  ERR_TICKWHEEL_IDEMPOTENT_BUSY: 409,
  // Raised in a consumer's handler, never by the server.
  ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK: 500,

  // Push delivery: a receiver's refusal (its verifyPush), and a failed attempt (kept as the
  // message's lastError, never an answer of the server).
  ERR_TICKWHEEL_PUSH_SIGNATURE: 401,
  ERR_TICKWHEEL_PUSH_FAILED: 500,
  // A target the server's --push-allow does not cover: the caller can choose another.
  ERR_TICKWHEEL_PUSH_NOT_ALLOWED: 403,

  // The server's own answers.
  ERR_TICKWHEEL_INVALID_REQUEST: 400,
  ERR_TICKWHEEL_UNAUTHORIZED: 401,
  ERR_TICKWHEEL_NOT_FOUND: 404,
  ERR_TICKWHEEL_CONFLICT: 409,
  ERR_TICKWHEEL_BODY_TOO_LARGE: 413,
  ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE: 415,
  ERR_TICKWHEEL_HOST_NOT_ALLOWED: 421,
  ERR_TICKWHEEL_RECOVERING: 503,
  ERR_TICKWHEEL_SHUTTING_DOWN: 503,
  ERR_TICKWHEEL_INTERNAL: 500,

  // The client's, the CLI's and the packaging's: never raised in a running server.
  ERR_TICKWHEEL_HTTP: 500,
  ERR_TICKWHEEL_NETWORK: 500,
  ERR_TICKWHEEL_COMMAND_FAILED: 500,
  ERR_TICKWHEEL_USAGE: 500,
  ERR_TICKWHEEL_INVALID_ARGUMENT: 500,
  ERR_TICKWHEEL_MISSING_DEPENDENCY: 500,
  ERR_TICKWHEEL_ASSERTION: 500,
};

/** Whether `code` is in the catalogue (and so in HTTP_STATUS). */
export function isErrorCode(code: unknown): code is TickwheelErrorCode {
  return typeof code === 'string' && Object.hasOwn(HTTP_STATUS, code);
}
