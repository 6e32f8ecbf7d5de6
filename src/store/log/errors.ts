/**
 * The message log's errors: LogError for its own rules broken by a caller (a position that is
 * no record, a commit without a reserve, ...), TickwheelCorruptError for a damaged record,
 * TickwheelUnavailableError (ERR_TICKWHEEL_IO) for a failed read or write.
 */

import {
  isSystemError,
  TickwheelCorruptError,
  TickwheelError,
  TickwheelUnavailableError,
} from '../../errors.js';

/** The codes LogError can have: a subset of the catalogue's (src/errors.ts). */
type LogErrorCode =
  | 'ERR_TICKWHEEL_RECORD_TOO_LARGE'
  | 'ERR_TICKWHEEL_CLOSED'
  | 'ERR_TICKWHEEL_INVALID_OPTION'
  | 'ERR_TICKWHEEL_INVALID_RECORD'
  | 'ERR_TICKWHEEL_INVALID_POSITION'
  | 'ERR_TICKWHEEL_SEGMENT_ACTIVE'
  | 'ERR_TICKWHEEL_INVALID_STATE';

export class LogError extends TickwheelError<LogErrorCode> {
  constructor(code: LogErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'LogError';
  }
}

/** Any error the message log raises itself (see the top of this file). */
export type LogFailure = LogError | TickwheelCorruptError | TickwheelUnavailableError;

export function isLogFailure(err: unknown): err is LogFailure {
  return (
    err instanceof LogError ||
    err instanceof TickwheelCorruptError ||
    err instanceof TickwheelUnavailableError
  );
}

export function closedError(what: string): LogError {
  return new LogError('ERR_TICKWHEEL_CLOSED', `cannot ${what} the message log: it is closed`);
}

export function ioError(what: string, cause: unknown): LogFailure {
  if (isLogFailure(cause)) return cause;
  const message = `${what} failed: ${describeCause(cause)}`;
  return new TickwheelUnavailableError('ERR_TICKWHEEL_IO', message, { cause });
}

/** The cause's message, with its errno code in front if the message does not already say it. */
export function describeCause(cause: unknown): string {
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

/**
 * Runs `operation`; an error of the operating system it fails with (ENOSPC, EMFILE, EISDIR, ...)
 * becomes ERR_TICKWHEEL_IO, saying `what` failed. tickwheel's own errors pass unchanged.
 */
export async function systemErrorsAsIo<T>(what: string, operation: () => Promise<T>): Promise<T> {
  try {
    return await operation();
  } catch (err) {
    if (err instanceof TickwheelError || !isSystemError(err)) throw err;
    throw ioError(what, err);
  }
}
