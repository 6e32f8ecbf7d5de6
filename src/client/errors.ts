/**
 * What a client call can fail with: the server answered with an error (TickwheelHttpError, with
 * the server's code), or no answer came at all (TickwheelNetworkError: refused, reset, timed
 * out). Both carry a `code`, like every tickwheel error.
 */

import type { WireErrorCode } from './protocol.js';

export class TickwheelHttpError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The server's error code (ERR_TICKWHEEL_*), or ERR_TICKWHEEL_HTTP for a non-tickwheel answer. */
  readonly code: WireErrorCode | 'ERR_TICKWHEEL_HTTP';
  /** The parsed response body (for a failed batch: `{ error, results }`). */
  readonly body: unknown;

  constructor(
    status: number,
    code: WireErrorCode | 'ERR_TICKWHEEL_HTTP',
    message: string,
    body: unknown,
  ) {
    super(message);
    this.name = 'TickwheelHttpError';
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

export class TickwheelNetworkError extends Error {
  /** ERR_TICKWHEEL_TIMEOUT when the request ran out of time, ERR_TICKWHEEL_NETWORK otherwise. */
  readonly code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT';

  constructor(
    code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT',
    message: string,
    cause: unknown,
  ) {
    super(message, { cause });
    this.name = 'TickwheelNetworkError';
    this.code = code;
  }
}
