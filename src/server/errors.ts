/**
 * Every failure is `{ error: { code, message, outcome } }`: 4xx for what the caller can change,
 * 5xx only for the server's own trouble (src/errors.ts). `outcome` (docs/http-api.md,
 * Retries): the queue's where it knows (TickwheelOutcomeError); 'none' for a refusal, the
 * server's own 503s, a closed queue and a read; else 'unknown', as it may follow a write.
 */

import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import {
  HTTP_STATUS,
  isErrorCode,
  isSystemError,
  outcomeAdvice,
  TickwheelError,
  TickwheelOutcomeError,
  type HttpErrorCode,
  type WriteOutcome,
} from '../errors.js';
import type { WireErrorCode, WireErrorDetail } from '../protocol/wire.js';
import { RETRY_AFTER_SECONDS } from './settings.js';

/** An error the server raises itself, with the status to answer with. */
export class HttpError extends TickwheelError<WireErrorCode> {
  readonly statusCode: number;
  constructor(statusCode: number, code: WireErrorCode, message: string) {
    super(code, message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
  }
}

export function httpError(code: WireErrorCode, message: string): HttpError {
  return new HttpError(HTTP_STATUS[code], code, message);
}

export function notFound(message: string): HttpError {
  return httpError('ERR_TICKWHEEL_NOT_FOUND', message);
}

export function conflict(message: string): HttpError {
  return httpError('ERR_TICKWHEEL_CONFLICT', message);
}

export function invalidRequest(message: string): HttpError {
  return httpError('ERR_TICKWHEEL_INVALID_REQUEST', message);
}

export const JSON_BODIES_ONLY = 'send request bodies as JSON, with content-type: application/json';

/** Fastify's own 4xx errors that deserve a code of their own; the rest are INVALID_REQUEST. */
const FASTIFY_ERRORS: Readonly<Record<string, [HttpErrorCode, string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: [
    'ERR_TICKWHEEL_BODY_TOO_LARGE',
    "the request body is larger than the server's body limit",
  ],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['ERR_TICKWHEEL_UNSUPPORTED_MEDIA_TYPE', JSON_BODIES_ONLY],
};

export interface ErrorResponse {
  statusCode: number;
  body: { error: WireErrorDetail };
}

/** Methods whose requests change nothing: their failures have outcome 'none'. */
const READS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The status and body for any error thrown while handling a request made with `method`. */
export function toErrorResponse(err: unknown, method = 'POST'): ErrorResponse {
  const { statusCode, body } = statusAndBody(err);
  const error = body.error;
  if (err instanceof TickwheelOutcomeError) {
    // Whatever its status (a batch refused in one partition and written in another): what may
    // have been written is named.
    error.outcome = 'unknown';
    if (err.id !== undefined) error.id = err.id;
    if (err.ids !== undefined) error.ids = [...err.ids];
    if (err.retry !== undefined) error.retry = err.retry;
    // The 5xx message is the server's own wording: the advice goes after it.
    if (statusCode >= 500) error.message = `${error.message} (${outcomeAdvice(err)})`;
  } else {
    error.outcome = definite(err, statusCode, method) ? 'none' : 'unknown';
  }
  return { statusCode, body };
}

/** Whether a failure that says nothing of its outcome surely changed nothing. */
function definite(err: unknown, statusCode: number, method: string): boolean {
  if (statusCode < 500 || err instanceof HttpError || READS.has(method)) return true;
  const { code, outcome } = (err ?? {}) as { code?: unknown; outcome?: WriteOutcome };
  return outcome === 'none' || code === 'ERR_TICKWHEEL_CLOSED';
}

function response(statusCode: number, code: WireErrorCode, message: string): ErrorResponse {
  return { statusCode, body: { error: { code, message, outcome: 'none' } } };
}

function statusAndBody(err: unknown): ErrorResponse {
  if (err instanceof HttpError) return response(err.statusCode, err.code, err.message);
  const error = (typeof err === 'object' && err !== null ? err : {}) as Partial<FastifyError>;
  const message = typeof error.message === 'string' ? error.message : String(err);
  if (error.validation !== undefined) {
    return response(400, 'ERR_TICKWHEEL_INVALID_REQUEST', message);
  }
  const code = typeof error.code === 'string' ? error.code : '';
  const status = isErrorCode(code) ? HTTP_STATUS[code] : undefined;
  // 500 is the status of the codes the server never raises (the client's, the CLI's): one seen
  // here is a bug, answered as INTERNAL below; the others are WireErrorCodes.
  if (status !== undefined && status !== 500) {
    const wire = code as WireErrorCode;
    return response(status, wire, status >= 500 ? serverSide(wire, err) : message);
  }
  const fastifyStatus = error.statusCode;
  if (typeof fastifyStatus === 'number' && fastifyStatus >= 400 && fastifyStatus < 500) {
    const [wire, text] = FASTIFY_ERRORS[code] ?? ['ERR_TICKWHEEL_INVALID_REQUEST', message];
    return response(fastifyStatus, wire, text);
  }
  // A fault of the machine (a full disk, no file descriptors left) that reached here without
  // being wrapped is still not a bug: the request may succeed once it has passed.
  if (isSystemError(err)) {
    return response(
      503,
      'ERR_TICKWHEEL_IO',
      'a read or write of the server failed; retry later (the server log has the details)',
    );
  }
  return response(500, 'ERR_TICKWHEEL_INTERNAL', 'internal error; the server log has the details');
}

function serverSide(code: WireErrorCode, err: unknown): string {
  switch (code) {
    case 'ERR_TICKWHEEL_CLOSED':
      return 'the queue is closed: the server is shutting down';
    case 'ERR_TICKWHEEL_IO':
      // Refused before any write: the store stopped at an earlier failed write.
      return (err as { outcome?: unknown } | null)?.outcome === 'none'
        ? 'the store takes no more writes since a write to the data directory failed (GET ' +
            '/healthz says why); nothing of this request was written: restart the server once ' +
            'the cause is fixed'
        : 'the data directory could not be read or written; the server log has the details';
    case 'ERR_TICKWHEEL_CORRUPT':
      return (
        'data this request needs is damaged on disk: the operator must stop the server and run ' +
        '`tickwheel repair --dir <data directory>`; the server log has the details'
      );
    case 'ERR_TICKWHEEL_FORMAT':
    case 'ERR_TICKWHEEL_INVALID_POSITION':
    case 'ERR_TICKWHEEL_INVALID_RECORD':
    case 'ERR_TICKWHEEL_INVALID_STATE':
    case 'ERR_TICKWHEEL_SEGMENT_ACTIVE':
    case 'ERR_TICKWHEEL_SNAPSHOT_REJECTED':
      return 'the store cannot serve this request; the server log has the details';
    default:
      return 'the queue cannot take this now; retry later';
  }
}

/** 503s whose cause may pass by itself: the answer says when to retry (Retry-After). */
const PASSING: ReadonlySet<WireErrorCode> = new Set<WireErrorCode>([
  'ERR_TICKWHEEL_IO',
  'ERR_TICKWHEEL_UNAVAILABLE',
  'ERR_TICKWHEEL_CAPACITY',
  'ERR_TICKWHEEL_MAX_PENDING',
  'ERR_TICKWHEEL_SHUTTING_DOWN',
  'ERR_TICKWHEEL_CLOSED',
]);

/** Fastify's error handler: logs what is the server's fault, answers in the one error format. */
export function handleError(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const { statusCode, body } = toErrorResponse(err, request.method);
  if (statusCode === 503 && PASSING.has(body.error.code)) {
    void reply.header('retry-after', RETRY_AFTER_SECONDS);
  }
  // The server's own 503s (recovering, shutting down) are states, not failures.
  if (statusCode >= 500 && !(err instanceof HttpError))
    request.log.error({ err }, 'request failed');
  else request.log.debug({ err }, 'request refused');
  void reply.code(statusCode).send(body);
}

/** Errors the router raises before a route runs (malformed %-escapes, over-long parameters). */
export function handleFrameworkError(
  err: FastifyError,
  _request: FastifyRequest,
  reply: FastifyReply,
): void {
  const statusCode = err.statusCode !== undefined && err.statusCode < 500 ? err.statusCode : 400;
  const { body } = response(statusCode, 'ERR_TICKWHEEL_INVALID_REQUEST', err.message);
  void reply.code(statusCode).send(body);
}

export function handleNotFound(request: FastifyRequest, reply: FastifyReply): void {
  const path = request.url.length > 200 ? `${request.url.slice(0, 200)}...` : request.url;
  const message = `no route ${request.method} ${path}`;
  void reply.code(404).send(response(404, 'ERR_TICKWHEEL_NOT_FOUND', message).body);
}

/** The parser's refusals that have a status of their own; any other is 400. */
const CLIENT_ERRORS: Readonly<Record<string, [status: number, message: string]>> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'the request took too long to arrive'],
  HPE_HEADER_OVERFLOW: [431, 'the request headers are too large'],
};

/** Requests Node's parser refuses never reach Fastify: answered in our format, then dropped. */
export function handleClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'malformed HTTP request'];
  if (socket.writable) socket.write(rawResponse(status, 'ERR_TICKWHEEL_INVALID_REQUEST', message));
  socket.destroy();
}

/** A whole error response, for a socket Fastify does not answer on; `headers` end in CRLF. */
export function rawResponse(status: number, code: WireErrorCode, message: string, headers = '') {
  const body = JSON.stringify(response(status, code, message).body);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n${headers}` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}
