/**
 * The wire format of the HTTP API (docs/http-api.md): request and response bodies and error
 * codes, as the server sends them and the client reads them (bounds: limits.ts).
 */

import type { TraceContext } from './trace-context.js';
import type { ClientErrorCode, CliErrorCode, TickwheelErrorCode, WriteOutcome } from '../errors.js';
import type {
  Backoff,
  MessageInfo,
  QueueStats,
  RecoveryReport,
  RecurringSpec,
  ScheduleInfo,
  TopicInfo,
  TopicUpdate,
} from './model.js';

export type { HttpErrorCode } from '../errors.js';

/**
 * The codes a server can answer with: those of the server's own errors (HttpErrorCode) and of
 * the queue's and the store's, which keep their code over HTTP. The client's and the CLI's own
 * codes never come from a server.
 */
export type WireErrorCode = Exclude<TickwheelErrorCode, ClientErrorCode | CliErrorCode>;

/** Every error response: a 4xx for anything the caller can fix, 5xx only for the server's own failures. */
export interface WireError {
  error: WireErrorDetail;
}

/**
 * An error, and whether the request took effect (docs/http-api.md, Retries): `outcome` 'none'
 * is a definite failure, nothing was changed; 'unknown' means it may have been. With
 * 'unknown', `id` (or `ids`, for a batch) names what may have been written: a message id, a
 * schedule's name, a topic; `retry: 'same-id'` says that sending the same request again with
 * that id is safe (it cannot make a second message).
 */
export interface WireErrorDetail {
  code: WireErrorCode;
  message: string;
  outcome: WriteOutcome;
  id?: string;
  ids?: string[];
  retry?: 'same-id';
}

/**
 * How a payload travels: 'json' (default) is the JSON value itself; 'base64' is bytes, as a
 * base64 string, for payloads that are a Buffer / Uint8Array in the embedded API.
 */
export type PayloadEncoding = 'json' | 'base64';

/** POST /v1/topics/:topic/messages */
export interface ScheduleBody {
  payload: unknown;
  payloadEncoding?: PayloadEncoding;
  /** One of delayMs / deliverAt (epoch ms); neither means now. */
  delayMs?: number;
  deliverAt?: number;
  /** Dedup key: the same id while the message is pending returns the pending message. */
  id?: string;
  maxAttempts?: number;
  backoff?: Backoff;
  /**
   * The W3C trace context to store with the message; default: the request's `traceparent` and
   * `tracestate` headers. A malformed one is ignored.
   */
  trace?: TraceContext;
}

/** 201 of a schedule: the message is as durable as the server's fsync policy promises. */
export interface ScheduleResult {
  id: string;
  deliverAt: number;
}

/** POST /v1/messages:batch */
export interface BatchBody {
  messages: Array<ScheduleBody & { topic: string }>;
}

/** 201 of a batch: one result per message, in order. */
export interface BatchResponse {
  results: ScheduleResult[];
}

/**
 * A batch in which some messages failed: the error status of the first failure, and one entry
 * per message. The ones with an id were scheduled (and are durable); the others were not. A
 * batch refused whole (a body that does not match the schema, say) has no `results`.
 */
export interface BatchErrorResponse extends WireError {
  results?: Array<ScheduleResult | WireError>;
}

/** GET /v1/messages/:id: the embedded queue's MessageInfo, as JSON. */
export type WireMessageInfo = MessageInfo;

/** PATCH /v1/messages/:id */
export interface RescheduleBody {
  delayMs?: number;
  deliverAt?: number;
}

export interface RescheduleResponse {
  rescheduled: true;
  deliverAt: number;
}

export interface CancelResponse {
  cancelled: true;
}

/** POST /v1/topics/:topic/receive */
export interface ReceiveBody {
  /** Messages at most, 1-1000. Default 1. */
  max?: number;
  /**
   * Long-poll: wait up to this long for a message, 0 to MAX_WAIT_MS (1 h; more is refused); the
   * server waits no longer than its maxWaitMs, however long this is. Default 0.
   */
  waitMs?: number;
  /** Redeliver unless acked within this long. Default: the queue's visibilityMs. */
  visibilityMs?: number;
  /**
   * Payload bytes at most in one answer (as stored; byte payloads grow by a third in base64).
   * The first message always comes; the rest wait, unused, for the next receive. Default
   * 8 MiB, at most 64 MiB.
   */
  maxBytes?: number;
}

export interface WireReceivedMessage {
  id: string;
  topic: string;
  payload: unknown;
  /** Present (as 'base64') only for byte payloads. */
  payloadEncoding?: PayloadEncoding;
  deliverAt: number;
  attempts: number;
  receipt: string;
  /** The trace context stored with the message, if it has one. */
  trace?: TraceContext;
}

export interface ReceiveResponse {
  messages: WireReceivedMessage[];
}

/** POST /v1/ack */
export interface AckBody {
  receipts: string[];
  /** Answer once the acks are durable, not once applied. Default: the server's durableAcks. */
  durable?: boolean;
}

/** results[i]: whether receipts[i] was a live delivery (false: unknown, stale or already acked). */
export interface AckResponse {
  acked: number;
  results: boolean[];
}

/** POST /v1/nack */
export interface NackBody {
  receipts: string[];
  /** Redeliver after this long. Default: each message's backoff. */
  delayMs?: number;
  /** Why the deliveries failed: kept as each message's lastError, with a dead letter too. */
  reason?: string;
  /** As AckBody.durable. */
  durable?: boolean;
}

export interface NackResponse {
  nacked: number;
  results: boolean[];
}

/** GET /v1/topics/:topic/dead?limit=100 */
export interface DeadLettersResponse {
  messages: WireMessageInfo[];
}

/**
 * GET /v1/topics/:topic/messages?from&until&limit&cursor: a page of the topic's pending
 * messages in due-time order (the queue's list()); `cursor` is absent on the last page.
 */
export interface ListResponse {
  messages: WireMessageInfo[];
  cursor?: string;
}

/** POST /v1/messages/:id/requeue */
export interface RequeueBody {
  delayMs?: number;
}

export interface RequeueResponse {
  requeued: true;
}

/**
 * GET /healthz: 200 `ok`; 503 while recovering, once the store stopped, if it failed to open,
 * or (a queue on Valkey/Redis) while Valkey/Redis does not answer.
 */
export interface HealthResponse {
  status: 'ok' | 'recovering' | 'stopped' | 'failed' | 'unavailable';
  /** Why it is not `ok`. */
  reason?: string;
}

/** GET /v1/stats: the queue's stats() and the server's own figures. */
export interface StatsResponse extends QueueStats {
  /** What the last start recovered from the data directory; null on Valkey/Redis. */
  recovery: RecoveryReport | null;
  server: { version: string; uptimeMs: number; maxWaitMs: number };
}

/** A topic's settings and counts (GET /v1/topics/:topic, and the answer of every change). */
export type WireTopic = TopicInfo;

/** PATCH /v1/topics/:topic: what is absent stays as it is; rateLimit null removes the limit. */
export type TopicUpdateBody = TopicUpdate;

export interface TopicListResponse {
  topics: WireTopic[];
}

/** A recurring schedule as the API answers it (GET, PUT, PATCH /v1/schedules/:name). */
export type WireSchedule = ScheduleInfo;

/** PUT /v1/schedules/:name; PATCH takes any of its fields. */
export type ScheduleBodyRecurring = RecurringSpec;

export interface ScheduleListResponse {
  schedules: WireSchedule[];
}

export interface ScheduleDeleteResponse {
  deleted: true;
}
