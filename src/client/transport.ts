/**
 * One HTTP exchange with the server, on fetch: the token, a timeout, JSON in and out, and retries
 * where repeating is safe (docs/http-api.md, Retries): always when the request never left, else
 * only when idempotent. A call that fails for good says what it may have written (CallOutcome).
 */

import type { TraceContext } from '../protocol/trace-context.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { AbortError, TickwheelError, TickwheelTypeError } from '../errors.js';
import { describe } from '../validate.js';
import { TickwheelHttpError, TickwheelNetworkError } from './errors.js';
import type { WireError } from '../protocol/wire.js';
import { MAX_ANSWER_BYTES } from '../protocol/limits.js';

export interface TransportOptions {
  url: string;
  token: string | undefined;
  timeoutMs: number;
  retries: number;
  retryDelayMs: number;
  fetch: typeof globalThis.fetch;
}

export interface Exchange {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: unknown;
  /** The error for a body JSON cannot hold, given what JSON.stringify threw; nothing is sent. */
  refuse?: (err: unknown) => Error;
  /** Safe to send again after a network error. */
  idempotent: boolean;
  /** The id (or a batch's ids) the request writes under, told in its network errors. */
  subject?: string | readonly string[];
  timeoutMs?: number;
  signal?: AbortSignal | undefined;
  /** Sent as the `traceparent` and `tracestate` headers. */
  trace?: TraceContext | undefined;
  /** Whether a successful answer has the shape this call's answers have (beyond JSON). */
  expect?: (answer: Record<string, unknown>) => boolean;
}

/** Error codes of a request that cannot have reached the server. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

function causeCode(err: unknown): string | undefined {
  let cause: unknown = err;
  for (let depth = 0; depth < 4 && typeof cause === 'object' && cause !== null; depth++) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    cause = (cause as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * Why a fetch failed: the code of the system error under it (ECONNREFUSED), or else the
 * innermost cause's message ("fetch failed: bad port" for a port fetch refuses to use).
 */
function failureOf(err: unknown): string {
  const code = causeCode(err);
  if (code !== undefined) return code;
  const outer = messageOf(err);
  let inner: unknown = (err as { cause?: unknown })?.cause;
  for (let depth = 0; depth < 4; depth++) {
    const next = (inner as { cause?: unknown } | undefined)?.cause;
    if (!(next instanceof Error)) break;
    inner = next;
  }
  return inner instanceof Error && inner.message !== outer ? `${outer}: ${inner.message}` : outer;
}

function headersOf(options: TransportOptions, accept: string): Record<string, string> {
  return {
    accept,
    'user-agent': 'tickwheel-client',
    ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
  };
}

export class Transport {
  private readonly headers: Record<string, string>;
  private readonly jsonHeaders: Record<string, string>;

  constructor(private readonly options: TransportOptions) {
    this.headers = headersOf(options, 'application/json');
    this.jsonHeaders = { ...this.headers, 'content-type': 'application/json' };
  }

  /** The answer's body; an error answer is thrown. */
  async send<T>(exchange: Exchange): Promise<T> {
    const { retries, retryDelayMs } = this.options;
    const body = exchange.body === undefined ? undefined : toJson(exchange);
    // The first failure whose outcome was unknown: a later attempt refused outright does not
    // undo what this one may have written, so the call fails with this one.
    let uncertain: (TickwheelHttpError | TickwheelNetworkError) | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        return (await this.once(exchange, body)) as T;
      } catch (err) {
        let failure: unknown = err;
        let again = false;
        if (err instanceof TickwheelHttpError) {
          again = err.outcome === 'unknown' && err.retry === 'same-id' && exchange.idempotent;
        } else if (err instanceof TickwheelNetworkError) {
          const notSent = NOT_SENT.has(causeCode(err.cause) ?? '');
          again = notSent || exchange.idempotent;
          failure = told(err, exchange, notSent);
        }
        const outcome = (failure as { outcome?: unknown }).outcome;
        if (outcome === 'unknown') uncertain ??= failure as TickwheelHttpError;
        if (!again || attempt >= retries) {
          throw uncertain !== undefined && outcome === 'none' ? uncertain : failure;
        }
        await sleep(retryDelayMs * 2 ** attempt, undefined, { signal: exchange.signal }).catch(
          () => {
            throw new AbortError(exchange.signal?.reason);
          },
        );
      }
    }
  }

  private async once(exchange: Exchange, body: string | undefined): Promise<unknown> {
    const { method, path, signal, trace } = exchange;
    let headers = body === undefined ? this.headers : this.jsonHeaders;
    if (trace !== undefined) {
      const { traceparent, tracestate } = trace;
      headers = { ...headers, traceparent, ...(tracestate === undefined ? {} : { tracestate }) };
    }
    const timeoutMs = exchange.timeoutMs ?? this.options.timeoutMs;
    const init = { method, headers, body };
    const [response, text] = await fetchWithin(this.options, path, init, timeoutMs, signal, (r) =>
      readAnswer(r, `${method} ${path}`),
    );
    const what = `${method} ${path}`;
    if (!response.ok) throw refusal(response, text, what);
    // Every answer of a tickwheel server is a JSON object: anything else (an HTML page from a
    // proxy or another program on that port) must not pass for a schedule that was made.
    const answer = parse(text, response);
    if (typeof answer === 'object' && answer !== null && !Array.isArray(answer)) {
      if (exchange.expect?.(answer as Record<string, unknown>) ?? true) return answer;
    }
    throw foreign(response.status, what, excerpt(text), answer ?? text);
  }
}

/**
 * An answer's text, refused past MAX_ANSWER_BYTES (a tickwheel server's largest is a receive of
 * MAX_RECEIVE_BYTES of payloads): a peer that sends without end does not fill the memory.
 */
async function readAnswer(response: Response, what: string): Promise<string> {
  const tooLarge = () =>
    foreign(response.status, what, ` (an answer over ${MAX_ANSWER_BYTES} bytes)`, undefined);
  if (Number(response.headers.get('content-length')) > MAX_ANSWER_BYTES) {
    await response.body?.cancel().catch(() => {});
    throw tooLarge();
  }
  if (response.body === null) return '';
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > MAX_ANSWER_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total).toString('utf8');
}

/**
 * What a stream's failure while its body flows is thrown as: the client's own errors as they
 * are, anything else (the connection cut, a line that is not JSON) as ERR_TICKWHEEL_NETWORK.
 */
export function streamBroke(what: string, err: unknown): Error {
  if (err instanceof TickwheelError) return err as Error;
  const reason = causeCode(err) ?? (err instanceof Error ? err.message : String(err));
  return new TickwheelNetworkError('ERR_TICKWHEEL_NETWORK', `${what} broke: ${reason}`, err);
}

/**
 * A request answered with a stream (GET: Server-Sent Events; POST: NDJSON): resolves once the
 * headers came, within the timeout; the body flows until the server ends it or `signal` aborts.
 */
export async function openStream(
  options: TransportOptions,
  path: string,
  signal: AbortSignal | undefined,
  body?: unknown,
): Promise<Response> {
  const method = body === undefined ? 'GET' : 'POST';
  const headers =
    body === undefined
      ? headersOf(options, 'text/event-stream')
      : { ...headersOf(options, 'application/x-ndjson'), 'content-type': 'application/json' };
  const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
  let response: Response;
  for (let attempt = 0; ; attempt++) {
    try {
      [response] = await fetchWithin(options, path, init, options.timeoutMs, signal, () => 0);
      break;
    } catch (err) {
      // A server restarting refuses for a moment: tried again as send() does, so that a consumer
      // reports one broken stream rather than each refused reopening.
      const notSent =
        err instanceof TickwheelNetworkError && NOT_SENT.has(causeCode(err.cause) ?? '');
      if (!notSent || attempt >= options.retries) throw err;
      await sleep(options.retryDelayMs * 2 ** attempt, undefined, { signal }).catch(() => {
        throw new AbortError(signal?.reason);
      });
    }
  }
  if (response.ok) return response;
  const what = `${method} ${path}`;
  throw refusal(response, await readAnswer(response, what).catch(() => ''), what);
}

/**
 * fetch, and `read` of its response, within `timeoutMs`; the time limit ends with them, so a
 * body left unread (a stream) flows on until `caller` aborts.
 */
async function fetchWithin<T>(
  options: TransportOptions,
  path: string,
  init: RequestInit & { method: string },
  timeoutMs: number,
  caller: AbortSignal | undefined,
  read: (response: Response) => Promise<T> | T,
): Promise<[Response, T]> {
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(), timeoutMs);
  const signal = caller === undefined ? limit.signal : AbortSignal.any([limit.signal, caller]);
  const base = options.url.replace(/\/+$/, '');
  try {
    const response = await options.fetch(base + path, { ...init, signal });
    return [response, await read(response)];
  } catch (err) {
    if (caller?.aborted) throw new AbortError(caller.reason);
    if (err instanceof TickwheelHttpError) throw err;
    if (limit.signal.aborted) {
      const late = `${init.method} ${path}: no answer within ${timeoutMs} ms`;
      throw new TickwheelNetworkError('ERR_TICKWHEEL_TIMEOUT', late, err);
    }
    const reason = failureOf(err);
    const failed = `${init.method} ${base}${path} failed: ${reason}`;
    throw new TickwheelNetworkError('ERR_TICKWHEEL_NETWORK', failed, err);
  } finally {
    clearTimeout(timer);
  }
}

/** The error for an answer with an error status: the server's own, or ERR_TICKWHEEL_HTTP. */
function refusal(response: Response, text: string, what: string): Error {
  const { status } = response;
  const body = parse(text, response);
  const error = (body as Partial<WireError> | undefined)?.error;
  if (typeof error?.code === 'string' && typeof error.message === 'string') {
    return new TickwheelHttpError(status, error.code, error.message, body);
  }
  return foreign(status, what, excerpt(text), body ?? text);
}

/**
 * ERR_TICKWHEEL_HTTP: an answer no tickwheel server gives (an error status without a tickwheel
 * error, a 2xx that is not the call's JSON, one too large), `shown` after what it is.
 */
function foreign(status: number, what: string, shown: string, body: unknown): TickwheelHttpError {
  const message = `${what}: HTTP ${status} from something that is not a tickwheel server${shown}`;
  return new TickwheelHttpError(status, 'ERR_TICKWHEEL_HTTP', message, body);
}

/** The start of an answer's text, for an error message. */
function excerpt(text: string): string {
  return text === '' ? ' (an empty answer)' : `: ${text.slice(0, 200)}`;
}

/** A network error that fails a call for good, with what its request may have written. */
function told(err: TickwheelNetworkError, exchange: Exchange, notSent: boolean) {
  const reads = exchange.method === 'GET';
  err.outcome = notSent || reads ? 'none' : 'unknown';
  if (reads || exchange.subject === undefined) return err;
  if (typeof exchange.subject === 'string') err.id = exchange.subject;
  else err.ids = exchange.subject;
  if (exchange.idempotent) err.retry = 'same-id';
  return err;
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * An exchange's body as JSON, made once for all its attempts; a value JSON cannot hold is refused
 * with a named error (`refuse`'s, or ERR_TICKWHEEL_INVALID_OPTION) rather than a plain TypeError.
 */
function toJson(exchange: Exchange): string {
  let failure: unknown;
  try {
    const text = JSON.stringify(exchange.body) as string | undefined;
    if (text !== undefined) return text;
    failure = `not a JSON value: ${describe(exchange.body)}`;
  } catch (err) {
    failure = err;
  }
  throw (
    exchange.refuse?.(failure) ??
    new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `${exchange.method} ${exchange.path}: the request body cannot be sent as JSON: ${messageOf(failure)}`,
      { cause: failure },
    )
  );
}

/** A JSON answer's body; undefined for an empty or non-JSON one. */
function parse(text: string, response: Response): unknown {
  const type = response.headers.get('content-type') ?? '';
  if (text === '' || !type.includes('json')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
