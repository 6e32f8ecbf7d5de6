/**
 * The queue's model as it crosses the wire: what a message, a topic and a recurring schedule
 * look like to a caller, embedded or over HTTP. The queue (src/queue) and the HTTP API's wire
 * types (wire.ts) both take them from here, so that neither imports the other's layer.
 *
 * Types only: importing this module runs no code.
 */

export type MessageStatus = 'scheduled' | 'ready' | 'inflight' | 'acked' | 'cancelled' | 'dead';

export interface Backoff {
  type: 'fixed' | 'exponential';
  /** Base delay in ms: fixed waits this long; exponential waits delayMs * 2^(attempt-1). */
  delayMs: number;
  /** Spread each wait by up to this fraction at random (0..1). Default 0 for fixed, 0.2 for exponential. */
  jitter?: number;
  /** Upper bound of one wait. Default one day. */
  maxDelayMs?: number;
}

export interface MessageInfo {
  id: string;
  topic: string;
  status: MessageStatus;
  deliverAt: number;
  attempts: number;
  /** Why its latest delivery failed, if one did (kept with a dead letter). */
  lastError?: string;
}

export type CatchUp = 'latest' | 'all' | 'none';

export type Overlap = 'allow' | 'skip';

/** What a user gives to create or replace a schedule. */
export interface RecurringSpec {
  topic: string;
  /** Each occurrence's message payload (JSON). Default null. */
  payload?: unknown;
  /** A cron expression: 5 fields, or 6 with seconds first. One of cron / everyMs. */
  cron?: string;
  /** IANA time zone of `cron`. Default 'UTC'. */
  timezone?: string;
  /** A fixed interval, 1,000 ms to 366 days. */
  everyMs?: number;
  /** No occurrence before this (epoch ms); with everyMs, the first occurrence. */
  startAt?: number;
  /** No occurrence after this (epoch ms). */
  endAt?: number;
  /** Occurrences missed while the queue was not running: see docs. Default 'latest'. */
  catchUp?: CatchUp;
  /** 'skip': no occurrence while the previous one's message is still live. Default 'allow'. */
  overlap?: Overlap;
  /** Of each occurrence's message. */
  maxAttempts?: number;
  backoff?: Backoff;
  /** No occurrences while paused (they are skipped, not made up later). */
  paused?: boolean;
}

/** A checked spec, every default filled in. */
export interface ScheduleSpec {
  topic: string;
  payload: unknown;
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  startAt: number | null;
  endAt: number | null;
  catchUp: CatchUp;
  overlap: Overlap;
  maxAttempts: number;
  backoff: Backoff | null;
  paused: boolean;
}

/** A schedule as get / list answer it. */
export interface ScheduleInfo extends ScheduleSpec {
  name: string;
  createdAt: number;
  updatedAt: number;
  /** The latest occurrence whose message was created, or null. */
  lastAt: number | null;
  /** The next occurrence, or null (paused, or past endAt). */
  nextAt: number | null;
  /** Occurrences created, and skipped (missed, overlapping, or while paused). */
  created: number;
  skipped: number;
}

/** Deliveries per second, as a token bucket. */
export interface RateLimit {
  /** Tokens added a second: 0.001 (one every 1,000 s) to 1,000,000. */
  perSecond: number;
  /** Most tokens saved up, an integer from 1 to 1,000,000. Default ceil(perSecond). */
  burst: number;
}

export type PushMethod = 'POST' | 'PUT' | 'PATCH';

/** A push target as given: url and secret, the rest has defaults (push.ts). */
export interface PushTargetInput {
  url: string;
  secret: string;
  method?: PushMethod;
  headers?: Record<string, string>;
  timeoutMs?: number;
  concurrency?: number;
}

/** A target as read back: its headers' names only, its secret not at all. */
export interface PushTargetView {
  url: string;
  method: PushMethod;
  headerNames: string[];
  timeoutMs: number;
  concurrency: number;
}

/**
 * A change of a topic's settings: what is absent stays as it is; rateLimit null removes the
 * limit, push null the push target (a push target given replaces the one before, whole).
 */
export interface TopicUpdate {
  paused?: boolean;
  rateLimit?: { perSecond: number; burst?: number } | null;
  push?: PushTargetInput | null;
}

/**
 * A topic's settings with its counts, as topicInfo() and GET /v1/topics/:topic answer. A push
 * target shows without its secret and its headers' values.
 */
export interface TopicInfo {
  topic: string;
  paused: boolean;
  rateLimit: RateLimit | null;
  push: PushTargetView | null;
  /** Live messages that are not dead: scheduled, ready or in flight. */
  pending: number;
  dead: number;
}
