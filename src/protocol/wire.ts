/** The HTTP API's bodies and error codes, as server and client share them (docs/http-api.md). */

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
  TopicPage,
  TopicUpdate,
} from './model.js';

export type { HttpErrorCode } from '../errors.js';

/** The codes a server can answer with: all but the client's and the CLI's own. */
export type WireErrorCode = Exclude<TickwheelErrorCode, ClientErrorCode | CliErrorCode>;

/** 4xx for anything the caller can fix, 5xx only for the server's own failures. */
export interface WireError {
  error: WireErrorDetail;
}

/**
 * `outcome` 'none': nothing was changed; 'unknown': it may have been, and `id` (`ids` for a
 * batch) names what; `retry: 'same-id'`: the same request with that id is safe to send again.
 */
export interface WireErrorDetail {
  code: WireErrorCode;
  message: string;
  outcome: WriteOutcome;
  id?: string;
  ids?: string[];
  retry?: 'same-id';
}

/** 'json' (default): the JSON value itself; 'base64': bytes (a Buffer or Uint8Array payload). */
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
  /** Default: the request's `traceparent` and `tracestate` headers; a malformed one is ignored. */
  trace?: Partial<TraceContext>;
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
 * Some messages failed: the status of the first failure; per message, its id (scheduled,
 * durable) or its error. A batch refused whole (a body the schema refuses) has no `results`.
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
  /** Long-poll, 0 to MAX_WAIT_MS (1 h), never longer than the server's maxWaitMs. Default 0. */
  waitMs?: number;
  /** Redeliver unless acked within this long. Default: the queue's visibilityMs. */
  visibilityMs?: number;
  /**
   * Payload bytes (as stored) in one answer, past the first message: the rest wait, untouched,
   * for the next receive. Default 8 MiB, at most 64 MiB.
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
  trace?: TraceContext;
}

export interface ReceiveResponse {
  messages: WireReceivedMessage[];
}

/**
 * POST /v1/topics/:topic/stream: answered with NDJSON lines, each a ReceiveResponse (one with
 * no messages every 15 s while nothing is ready).
 */
export interface StreamBody {
  /** Deliveries of the stream in flight at once (unacked, not nacked), 1-1000. */
  window: number;
  /** As in ReceiveBody: the queue's default when left out. */
  visibilityMs?: number;
  /** Payload bytes of one line at most (a larger first message goes alone). Default 8 MiB. */
  maxBytes?: number;
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

/** GET /v1/topics/:topic/messages?from&until&limit&cursor: a page of list(). */
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

/** GET /healthz: 200 `ok`, else 503. */
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

/** GET /v1/topics/:topic, and the answer of every change. */
export type WireTopic = TopicInfo;

/** PATCH /v1/topics/:topic */
export type TopicUpdateBody = TopicUpdate;

/** GET /v1/topics?limit&cursor: a page of topicList(). */
export type TopicListResponse = TopicPage;

/** GET, PUT, PATCH /v1/schedules/:name */
export type WireSchedule = ScheduleInfo;

/** PUT /v1/schedules/:name; PATCH takes any of its fields. */
export type ScheduleBodyRecurring = RecurringSpec;

export interface ScheduleListResponse {
  schedules: WireSchedule[];
}

export interface ScheduleDeleteResponse {
  deleted: true;
}
