/**
 * The error catalogue: every code tickwheel uses (published codes never change; messages may),
 * and TickwheelError, the base of every error it throws. TickwheelTypeError and
 * TickwheelRangeError extend Node's TypeError and RangeError instead, so TickwheelError answers
 * `instanceof` itself (Symbol.hasInstance).
 */

/** The server's own answers (HttpErrorCode), apart from the codes of what it serves. */
const HTTP_ANSWERS = {
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
} as const;

/**
 * Every code with the HTTP status the server answers it with (server/errors.ts): 4xx where the
 * caller can change something, 503 where the server cannot do it now, 500 for codes the server
 * never raises.
 */
export const HTTP_STATUS = {
  // Timers, clocks and wheels (docs/timers.md); also every layer's argument checks (validate.ts).
  ERR_TICKWHEEL_INVALID_DELAY: 400,
  ERR_TICKWHEEL_INVALID_CALLBACK: 400,
  ERR_TICKWHEEL_INVALID_OPTION: 400,
  ERR_TICKWHEEL_MAX_PENDING: 503,
  ERR_TICKWHEEL_CAPACITY: 503,
  ERR_TICKWHEEL_CLOSED: 503,
  ERR_TICKWHEEL_TIMER_STOPPED: 500,
  ERR_TICKWHEEL_REENTRANT: 500,
  // AbortError's: the code of Node's own AbortError, so that checks written for Node's hold.
  ABORT_ERR: 500,

  // The patterns (docs/patterns.md): deadlines that passed, duplicate request ids, lost leases.
  ERR_TICKWHEEL_TIMEOUT: 503,
  ERR_TICKWHEEL_DUPLICATE_ID: 409,
  ERR_TICKWHEEL_LEASE_LOST: 500,

  // The delay queue refusing a message (docs/http-api.md).
  ERR_TICKWHEEL_INVALID_MESSAGE: 400,
  ERR_TICKWHEEL_INVALID_TOPIC: 400,
  ERR_TICKWHEEL_INVALID_ID: 400,
  ERR_TICKWHEEL_PAYLOAD_TOO_LARGE: 413,
  // A reader of queue events fell too far behind (events.ts): events were lost.
  ERR_TICKWHEEL_EVENTS_LOST: 503,

  // The store and its data directory (docs/storage.md): a record too large is the caller's;
  // the rest is the disk, the data or a bug.
  ERR_TICKWHEEL_RECORD_TOO_LARGE: 413,
  ERR_TICKWHEEL_LOCKED: 423,
  // The open queue's LOCK file was deleted or replaced: another process may be writing.
  ERR_TICKWHEEL_LOCK_LOST: 503,
  ERR_TICKWHEEL_IO: 503,
  ERR_TICKWHEEL_CORRUPT: 503,
  ERR_TICKWHEEL_FORMAT: 503,
  // The message log's own invariants (LogError): a caller of the log broke one, a bug.
  ERR_TICKWHEEL_INVALID_RECORD: 503,
  ERR_TICKWHEEL_INVALID_POSITION: 503,
  ERR_TICKWHEEL_SEGMENT_ACTIVE: 503,
  ERR_TICKWHEEL_INVALID_STATE: 503,
  // A snapshot file that cannot be used; recovery then replays the log instead.
  ERR_TICKWHEEL_SNAPSHOT_REJECTED: 503,
  // A cluster write reached the primary but not, in time, the replicas its durability asks for.
  ERR_TICKWHEEL_NOT_DURABLE: 503,
  // No Valkey/Redis server of the cluster answered in time (connectTimeoutMs).
  ERR_TICKWHEEL_UNAVAILABLE: 503,
  // A cluster node asked for a durability no primary's replicas can give: refused at open.
  ERR_TICKWHEEL_NO_REPLICA: 503,
  // A cluster partition's data vanished from the server: reported to onError, never thrown.
  ERR_TICKWHEEL_DATA_LOST: 503,

  // Idempotent consumers (docs/idempotent.md): a claim held elsewhere, a rolled-back COMMIT
  // (raised in a consumer's handler, never by the server).
  ERR_TICKWHEEL_IDEMPOTENT_BUSY: 409,
  ERR_TICKWHEEL_IDEMPOTENT_ROLLED_BACK: 500,

  // HTTP push (docs/push.md): a receiver's refusal (its verifyPush), a failed attempt (kept as
  // the message's lastError), a target the server's --push-allow does not cover.
  ERR_TICKWHEEL_PUSH_SIGNATURE: 401,
  ERR_TICKWHEEL_PUSH_FAILED: 500,
  ERR_TICKWHEEL_PUSH_NOT_ALLOWED: 403,

  ...HTTP_ANSWERS,

  // The client's (ClientErrorCode), the CLI's (CliErrorCode), a missing optional peer
  // dependency's, and a broken invariant of tickwheel's own code (src/assert.ts): never raised
  // in a running server.
  ERR_TICKWHEEL_HTTP: 500,
  ERR_TICKWHEEL_NETWORK: 500,
  ERR_TICKWHEEL_COMMAND_FAILED: 500,
  ERR_TICKWHEEL_USAGE: 500,
  ERR_TICKWHEEL_INVALID_ARGUMENT: 500,
  ERR_TICKWHEEL_MISSING_DEPENDENCY: 500,
  ERR_TICKWHEEL_ASSERTION: 500,
} as const satisfies Record<`ERR_TICKWHEEL_${string}` | 'ABORT_ERR', number>;

/** Every code a tickwheel error can have. */
export type TickwheelErrorCode = keyof typeof HTTP_STATUS;

/** Only over HTTP: the server's own answers (docs/http-api.md, Errors). */
export type HttpErrorCode = keyof typeof HTTP_ANSWERS;

/** Only in the client: no answer came (NETWORK), or the answer was not a tickwheel error (HTTP). */
export type ClientErrorCode = 'ERR_TICKWHEEL_HTTP' | 'ERR_TICKWHEEL_NETWORK';

/** Only in the `tickwheel` command: a command that failed, a command line it cannot run. */
export type CliErrorCode =
  'ERR_TICKWHEEL_COMMAND_FAILED' | 'ERR_TICKWHEEL_USAGE' | 'ERR_TICKWHEEL_INVALID_ARGUMENT';

/** Whether `code` is in the catalogue (and so in HTTP_STATUS). */
export function isErrorCode(code: unknown): code is TickwheelErrorCode {
  return typeof code === 'string' && Object.hasOwn(HTTP_STATUS, code);
}

/**
 * A process warning with a tickwheel code: what a fault, or an error a listener threw, becomes
 * when nothing else takes it.
 */
export function emitCodedWarning(
  code: string,
  message: string,
  cause?: unknown,
  name = 'TickwheelWarning',
): void {
  const warning = new Error(message, cause === undefined ? {} : { cause });
  warning.name = name;
  (warning as Error & { code: string }).code = code;
  process.emitWarning(warning);
}

/** The base of every tickwheel error (see the top of this file); each subclass has its `name`. */
export class TickwheelError<C extends TickwheelErrorCode = TickwheelErrorCode> extends Error {
  readonly code: C;
  /** 'unknown' on a TickwheelOutcomeError; 'none' where a store refused before writing. */
  declare outcome?: WriteOutcome;
  constructor(code: C, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }

  static override [Symbol.hasInstance](value: unknown): boolean {
    const ordinary = Function.prototype[Symbol.hasInstance];
    if (this !== TickwheelError) return ordinary.call(this, value);
    return (
      ordinary.call(TickwheelError, value) ||
      value instanceof TickwheelTypeError ||
      value instanceof TickwheelRangeError
    );
  }
}

/** A value of the wrong type: a delay that is not a number, a callback that is not a function. */
export class TickwheelTypeError extends TypeError implements TickwheelError {
  readonly code: TickwheelErrorCode;
  constructor(code: TickwheelErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TickwheelTypeError';
    this.code = code;
  }
}

/** A number out of range: NaN or infinite delays, too many pending timers. */
export class TickwheelRangeError extends RangeError implements TickwheelError {
  readonly code: TickwheelErrorCode;
  constructor(code: TickwheelErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TickwheelRangeError';
    this.code = code;
  }
}

/** A call the object's current state does not allow: closed, stopped, shut down, ... */
export class TickwheelStateError extends TickwheelError {
  override name = 'TickwheelStateError';
}

/** Refuses a call on a closed (or stopped: `code`) object; `message` says what to do instead. */
export function checkOpen(
  closed: boolean,
  message: string,
  code: 'ERR_TICKWHEEL_CLOSED' | 'ERR_TICKWHEEL_TIMER_STOPPED' = 'ERR_TICKWHEEL_CLOSED',
): void {
  if (closed) throw new TickwheelStateError(code, message);
}

export type UnavailableErrorCode =
  | 'ERR_TICKWHEEL_IO'
  | 'ERR_TICKWHEEL_LOCKED'
  | 'ERR_TICKWHEEL_LOCK_LOST'
  | 'ERR_TICKWHEEL_UNAVAILABLE'
  | 'ERR_TICKWHEEL_NOT_DURABLE'
  | 'ERR_TICKWHEEL_DATA_LOST';

/**
 * What the queue stands on failed or is not there (the disk, a data directory's lock, a
 * Valkey/Redis server): never the caller's mistake; retry, or let the operator act on it.
 */
export class TickwheelUnavailableError extends TickwheelError<UnavailableErrorCode> {
  override name = 'TickwheelUnavailableError';
}

/** One damaged stretch of a data directory's message log. */
export interface StoreDamage {
  /** File `log/<segment, 10 digits>.seg`. */
  segment: number;
  /** Damaged bytes [from, to); `to` absent when not known (a missing file). */
  from: number;
  to?: number;
  /** Missing, cut short, a CRC mismatch, ... */
  reason: string;
  /** Live messages that had their payload there, when known (from the last checkpoint). */
  messages?: number;
}

/** A log damaged where it had been made durable, found at open or when a record is read. */
export class TickwheelCorruptError extends TickwheelError<'ERR_TICKWHEEL_CORRUPT'> {
  readonly damage: readonly StoreDamage[];
  constructor(message: string, damage: readonly StoreDamage[] = [], options?: { cause?: unknown }) {
    super('ERR_TICKWHEEL_CORRUPT', message, options);
    this.name = 'TickwheelCorruptError';
    this.damage = damage;
  }
}

/** An optional part's packages (`missing`) are not installed; `install` is the command. */
export class TickwheelDependencyError extends TickwheelError {
  readonly missing: readonly string[];
  readonly install: string;
  constructor(message: string, missing: readonly string[], install: string) {
    super('ERR_TICKWHEEL_MISSING_DEPENDENCY', message);
    this.name = 'TickwheelDependencyError';
    this.missing = missing;
    this.install = install;
  }
}

/** What a failed write did: nothing, or maybe all of it (docs/http-api.md, Retries). */
export type WriteOutcome = 'none' | 'unknown';

/** The codes of failures that can come after a write reached the disk or the server. */
const MAYBE_WRITTEN: ReadonlySet<string> = new Set([
  'ERR_TICKWHEEL_IO',
  'ERR_TICKWHEEL_NOT_DURABLE',
  'ERR_TICKWHEEL_UNAVAILABLE',
  'ERR_TICKWHEEL_TIMEOUT',
]);

/**
 * A write that failed after it may have taken effect (see MAYBE_WRITTEN); code and `cause` are
 * the failure's. Any other error of a write is definite: nothing changed. `id` (`ids`: a batch)
 * names what was written; `retry` 'same-id': repeating the call with it is safe (absent for an
 * id the caller cannot give: look it up before scheduling again).
 */
export class TickwheelOutcomeError extends TickwheelError {
  declare readonly outcome: 'unknown';
  readonly id: string | undefined;
  readonly ids: readonly string[] | undefined;
  readonly retry: 'same-id' | undefined;
  constructor(
    code: TickwheelErrorCode,
    message: string,
    subject: { id?: string; ids?: readonly string[]; retry: boolean },
    options?: ErrorOptions,
  ) {
    super(code, message, options);
    this.name = 'TickwheelOutcomeError';
    this.outcome = 'unknown';
    this.id = subject.id;
    this.ids = subject.ids;
    this.retry = subject.retry ? 'same-id' : undefined;
  }
}

/** What a write call throws for `err`: an outcome error naming `subject` if it may have written. */
export function mayHaveWritten(err: unknown, subject: string | readonly string[]): unknown {
  if (err instanceof TickwheelOutcomeError || !isMaybeWritten(err)) return err;
  return outcomeUnknown(err, subject);
}

/** Whether a write's failure `err` may have come after the write took effect (see above). */
export function isMaybeWritten(err: unknown): boolean {
  if (err instanceof TickwheelOutcomeError) return true;
  if (!(err instanceof Error) || (err as { outcome?: unknown }).outcome === 'none') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  // A system call's own error (ENOSPC, EIO, ...) that no layer wrapped is an I/O failure.
  return MAYBE_WRITTEN.has(code) || /^E[A-Z0-9]+$/.test(code);
}

/** A TickwheelOutcomeError for `err`, whatever it is: for failures known to come after a write. */
export function outcomeUnknown(
  err: unknown,
  subject: string | readonly string[] | undefined,
  retry = true,
): TickwheelOutcomeError {
  if (err instanceof TickwheelOutcomeError && subject === undefined) return err;
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  const known = typeof code === 'string' && code.startsWith('ERR_TICKWHEEL_');
  const ids = typeof subject === 'string' || subject === undefined ? undefined : [...subject];
  const id = typeof subject === 'string' ? subject : undefined;
  const subjectOf = { id, ids, retry: retry && (id !== undefined || ids !== undefined) };
  return new TickwheelOutcomeError(
    known ? (code as TickwheelErrorCode) : 'ERR_TICKWHEEL_IO',
    `${message} (${outcomeAdvice(subjectOf)})`,
    subjectOf,
    { cause: err },
  );
}

/** What an error message says of a write whose outcome is unknown, and how to retry it. */
export function outcomeAdvice(
  subject: Pick<TickwheelOutcomeError, 'id' | 'ids'> & { retry: boolean | 'same-id' | undefined },
): string {
  const { id, ids, retry } = subject;
  if (id === undefined && ids === undefined) return 'it may have taken effect';
  const named = id !== undefined ? `id ${id}` : 'the same ids';
  return retry === true || retry === 'same-id'
    ? `it may have taken effect: repeating it with ${named} is safe`
    : `it may have taken effect: look ${named} up before repeating it`;
}

/** Whether `err`, or a `cause` of it, is an operating system error (an errno code and syscall). */
export function isSystemError(err: unknown): boolean {
  for (let depth = 0; depth < 8 && typeof err === 'object' && err !== null; depth++) {
    const { code, errno, syscall, cause } = err as Record<string, unknown>;
    if (
      typeof code === 'string' &&
      /^E[A-Z0-9]+$/.test(code) &&
      (typeof errno === 'number' || typeof syscall === 'string')
    ) {
      return true;
    }
    err = cause;
  }
  return false;
}

/** An aborted wait: the name and code of Node's own AbortError; `cause` is the signal's reason. */
export class AbortError extends TickwheelError<'ABORT_ERR'> {
  constructor(cause?: unknown) {
    super('ABORT_ERR', 'The operation was aborted', { cause });
    this.name = 'AbortError';
  }
}
