/** What a client call fails with: an error answer (TickwheelHttpError), or no answer at all. */

import { TickwheelError, type WriteOutcome } from '../errors.js';
import type { WireErrorCode, WireErrorDetail } from '../protocol/wire.js';

/**
 * What a failed call may have written (docs/http-api.md, Retries), as the server said it or,
 * for a request that got no answer, as the client knows it.
 */
export interface CallOutcome {
  /**
   * 'none': nothing was changed. 'unknown': the request may have taken effect; `id` or `ids`
   * name what it may have written. Undefined: the answer did not say (not a tickwheel server's).
   */
  readonly outcome: WriteOutcome | undefined;
  /** The message id, schedule name or topic the request may have written. */
  readonly id: string | undefined;
  /** For a batch: the ids of the messages it may have written. */
  readonly ids: readonly string[] | undefined;
  /** 'same-id': making the same call again with that id (or those ids) is safe. */
  readonly retry: 'same-id' | undefined;
}

export class TickwheelHttpError
  extends TickwheelError<WireErrorCode | 'ERR_TICKWHEEL_HTTP'>
  implements CallOutcome
{
  readonly status: number;
  /** The server's error code (ERR_TICKWHEEL_*), or ERR_TICKWHEEL_HTTP for a non-tickwheel answer. */
  declare readonly code: WireErrorCode | 'ERR_TICKWHEEL_HTTP';
  /** The parsed response body (for a failed batch: `{ error, results }`). */
  readonly body: unknown;
  declare readonly outcome: WriteOutcome | undefined;
  readonly id: string | undefined;
  readonly ids: readonly string[] | undefined;
  readonly retry: 'same-id' | undefined;

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
    const error = (body as { error?: Partial<WireErrorDetail> } | undefined)?.error;
    const outcome = error?.outcome;
    this.outcome = outcome === 'none' || outcome === 'unknown' ? outcome : undefined;
    this.id = typeof error?.id === 'string' ? error.id : undefined;
    this.ids = Array.isArray(error?.ids) ? error.ids.map(String) : undefined;
    this.retry = error?.retry === 'same-id' ? 'same-id' : undefined;
  }
}

export class TickwheelNetworkError
  extends TickwheelError<'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT'>
  implements CallOutcome
{
  /** ERR_TICKWHEEL_TIMEOUT when the request ran out of time, ERR_TICKWHEEL_NETWORK otherwise. */
  declare readonly code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT';
  /**
   * 'none' for a request that cannot have reached the server (connection refused, host not
   * found) or that changes nothing (a GET); 'unknown' for any other: the server may have
   * carried it out before the answer was lost.
   */
  declare outcome: WriteOutcome | undefined;
  // As CallOutcome says; the id is the one the client made for a schedule given none.
  id: string | undefined = undefined;
  ids: readonly string[] | undefined = undefined;
  retry: 'same-id' | undefined = undefined;

  constructor(
    code: 'ERR_TICKWHEEL_NETWORK' | 'ERR_TICKWHEEL_TIMEOUT',
    message: string,
    cause: unknown,
  ) {
    super(code, message, { cause });
    this.name = 'TickwheelNetworkError';
  }
}

/** A stream whose unfinished line or block passed `limit` characters: a peer gone wrong. */
export function overlong(stream: string, limit: number): TickwheelNetworkError {
  return new TickwheelNetworkError(
    'ERR_TICKWHEEL_NETWORK',
    `${stream} sent over ${limit} characters without ending a line: not a tickwheel server?`,
    undefined,
  );
}
