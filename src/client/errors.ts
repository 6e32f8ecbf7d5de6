/**
 * What a client call can fail with: the server answered with an error (TickwheelHttpError, with
 * the server's code), or no answer came at all (TickwheelNetworkError: refused, reset, timed
 * out). Both are TickwheelErrors with a `code`.
 */

import { TickwheelError } from '../errors.js';
import type { WireErrorCode } from '../protocol/wire.js';

export class TickwheelHttpError extends TickwheelError<WireErrorCode | 'ERR_TICKWHEEL_HTTP'> {
  /** The HTTP status. */
  readonly status: number;
  /** The server's error code (ERR_TICKWHEEL_*), or ERR_TICKWHEEL_HTTP for a non-tickwheel answer. */
  declare readonly code: WireErrorCode | 'ERR_TICKWHEEL_HTTP';
  /** The parsed response body (for a failed batch: `{ error, results }`). */
  readonly body: unknown;

  constructor(
    status: number,
    code: WireErrorCode | 'ERR_TICKWHEEL_HTTP',
    message: string,
    body: unknown,
  ) {
    super(code, message);
    this.name = 'TickwheelHttpError';
    this.status = status;
    this.body = body;
  }
}

export class TickwheelNetworkError extends TickwheelError<
  'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT'
> {
  /** ERR_TICKWHEEL_TIMEOUT when the request ran out of time, ERR_TICKWHEEL_NETWORK otherwise. */
  declare readonly code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT';

  constructor(
    code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT',
    message: string,
    cause: unknown,
  ) {
    super(code, message, { cause });
    this.name = 'TickwheelNetworkError';
  }
}
