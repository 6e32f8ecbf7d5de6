/**
 * The dashboard's calls to the server's /v1 routes. The bearer token, when the server needs one,
 * lives in sessionStorage: it is gone when the tab closes and is never put in a URL.
 *
 * Every failure is one of three errors, so the page can say what to do about it: Unauthorized
 * (ask for the token), Unreachable (the server is down or the network is: keep retrying) and
 * ApiError (the server refused the request: show its message).
 */

const TOKEN_KEY = 'tickwheel.token';
/** A request the server has not answered in this long counts as the server being unreachable. */
const TIMEOUT_MS = 15_000;

export interface DashboardSnapshot {
  now: number;
  version: string;
  uptimeMs: number;
  counters: Record<string, number>;
  /** The topics with the most messages (at most 100). scheduled: not yet due; dead: dead letters. */
  topics: Record<string, TopicCounts>;
  /** Topics with live messages, shown in `topics` or not; `otherTopics` sums those not shown. */
  topicCount: number;
  otherTopics: TopicCounts;
  totals: { inMemory: number; live: number | null; dead: number | null; loadedUntil: number };
  latenessMs: { p50: number | null; p99: number | null; max: number | null };
  /** Scheduled messages by time until due: [fromMs, untilMs) from now; untilMs null = beyond. */
  upcoming: Array<{ label: string; fromMs: number; untilMs: number | null; count: number }>;
  wheel: {
    levels: Array<{ cursor: number; slots: number[]; slotsPerCell: number }>;
    truncated: boolean;
  };
  /** Null on one machine; on Valkey/Redis or PostgreSQL, the nodes and the partitions each owns. */
  cluster: {
    node: string;
    queue: string;
    partitions: number;
    durability: string;
    nodes: Array<{ node: string; partitions: number[]; alive: boolean }>;
    leaseChanges: number;
  } | null;
}

export interface TopicCounts {
  scheduled: number;
  ready: number;
  inflight: number;
  dead: number;
}

export interface MessageInfo {
  id: string;
  topic: string;
  status: string;
  deliverAt: number;
  attempts: number;
  /** Why the last delivery failed, from servers that report it. */
  lastError?: string;
}

/** A topic's settings and counts (GET /v1/topics/:topic). */
export interface TopicSettingsInfo {
  topic: string;
  paused: boolean;
  rateLimit: { perSecond: number; burst: number } | null;
  /** Where the server pushes the topic's messages (docs/push.md): never its secret. */
  push: {
    url: string;
    method: string;
    headerNames: string[];
    timeoutMs: number;
    concurrency: number;
  } | null;
  pending: number;
  dead: number;
}

/** A recurring schedule as the server answers it (docs/http-api.md, "Recurring schedules"). */
export interface ScheduleInfo {
  name: string;
  topic: string;
  payload: unknown;
  /** Exactly one of cron (with its IANA time zone) and everyMs is set. */
  cron: string | null;
  timezone: string | null;
  everyMs: number | null;
  startAt: number | null;
  endAt: number | null;
  /** Occurrences missed while the queue was not running: the latest, all, or none are made. */
  catchUp: 'latest' | 'all' | 'none';
  /** skip: no occurrence while the previous one's message is still live. */
  overlap: 'allow' | 'skip';
  maxAttempts: number;
  backoff: {
    type: 'fixed' | 'exponential';
    delayMs: number;
    jitter?: number;
    maxDelayMs?: number;
  } | null;
  paused: boolean;
  createdAt: number;
  updatedAt: number;
  /** The latest occurrence made a message: with overlap allow, that is the next one, ahead. */
  lastAt: number | null;
  /** Null when paused or past endAt. */
  nextAt: number | null;
  /** Occurrences made messages, and skipped (missed, overlapping or while paused). */
  created: number;
  skipped: number;
}

/** What PUT /v1/schedules/:name takes: one of cron and everyMs; the server fills in the rest. */
export interface ScheduleSpec {
  topic: string;
  cron?: string;
  /** With cron only; UTC when left out. */
  timezone?: string;
  everyMs?: number;
  payload?: unknown;
}

/** The server said 401. */
export class Unauthorized extends Error {
  constructor(
    /** Whether a token went with the request: if so, that token is wrong. */
    readonly tokenSent: boolean,
    message: string,
  ) {
    super(message);
  }
}

/** No answer: the server is down, the network is, or the server hangs. */
export class Unreachable extends Error {
  constructor(
    /** How it failed, when there is more to say than that it did: '' or a few words. */
    readonly detail = '',
  ) {
    super(`cannot reach the tickwheel server${detail === '' ? '' : ` (${detail})`}`);
  }
}

/** The server answered with an error: `message` is its own explanation. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token === null || token === '') sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
}

/** The `error.message` of the server's `{error: {code, message}}` body, if the body is one. */
function serverMessage(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return undefined;
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && message !== '' ? message : undefined;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const token = getToken();
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    const timedOut = err instanceof DOMException && err.name === 'TimeoutError';
    throw new Unreachable(timedOut ? `no answer in ${TIMEOUT_MS / 1000} s` : '');
  }
  const text = await response.text().catch(() => '');
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  const message = serverMessage(json);
  if (response.status === 401) {
    throw new Unauthorized(token !== null, message ?? 'this server needs a token');
  }
  if (!response.ok) {
    // A proxy in front of a server that is down answers for it, without tickwheel's error body.
    if (message === undefined && [502, 503, 504].includes(response.status)) {
      throw new Unreachable(`HTTP ${response.status} ${response.statusText}`.trim());
    }
    throw new ApiError(
      response.status,
      message ?? `HTTP ${response.status} ${response.statusText}`.trim(),
    );
  }
  if (json === undefined) {
    throw new ApiError(response.status, `${method} ${path} did not answer with JSON`);
  }
  return json as T;
}

const enc = encodeURIComponent;

/** Dead letters listed per topic; the topic card says when there are more. */
export const DEAD_LETTER_LIMIT = 100;

/** Upcoming messages a page of the topic card lists. */
export const UPCOMING_PAGE = 20;

/** A page of GET /v1/topics/:topic/messages: `cursor` names the next page; none on the last. */
export interface MessagePage {
  messages: MessageInfo[];
  cursor?: string;
}

export const api = {
  snapshot: () => call<DashboardSnapshot>('GET', '/v1/dashboard'),
  message: (id: string) => call<MessageInfo>('GET', `/v1/messages/${enc(id)}`),
  preview: (id: string) =>
    call<{ preview: string; truncated: boolean }>('GET', `/v1/messages/${enc(id)}/preview`),
  cancel: (id: string) => call<{ cancelled: boolean }>('DELETE', `/v1/messages/${enc(id)}`),
  reschedule: (id: string, delayMs: number) =>
    call<{ rescheduled: boolean; deliverAt: number }>('PATCH', `/v1/messages/${enc(id)}`, {
      delayMs,
    }),
  deadLetters: (topic: string) =>
    call<{ messages: MessageInfo[] }>(
      'GET',
      `/v1/topics/${enc(topic)}/dead?limit=${DEAD_LETTER_LIMIT}`,
    ),
  /** Pending messages of a topic in due-time order, the page after `cursor` (or the first). */
  upcoming: (topic: string, cursor?: string) =>
    call<MessagePage>(
      'GET',
      `/v1/topics/${enc(topic)}/messages?limit=${UPCOMING_PAGE}${
        cursor === undefined ? '' : `&cursor=${enc(cursor)}`
      }`,
    ),
  topic: (topic: string) => call<TopicSettingsInfo>('GET', `/v1/topics/${enc(topic)}`),
  pause: (topic: string) => call<TopicSettingsInfo>('POST', `/v1/topics/${enc(topic)}/pause`, {}),
  resume: (topic: string) => call<TopicSettingsInfo>('POST', `/v1/topics/${enc(topic)}/resume`, {}),
  configureTopic: (
    topic: string,
    update: {
      paused?: boolean;
      rateLimit?: { perSecond: number; burst?: number } | null;
      push?: { url: string; secret: string } | null;
    },
  ) => call<TopicSettingsInfo>('PATCH', `/v1/topics/${enc(topic)}`, update),
  requeue: (id: string) =>
    call<{ requeued: boolean }>('POST', `/v1/messages/${enc(id)}/requeue`, {}),
  /** A server without recurring schedules (an earlier version on Valkey/Redis) answers 501. */
  schedules: () => call<{ schedules: ScheduleInfo[] }>('GET', '/v1/schedules'),
  putSchedule: (name: string, spec: ScheduleSpec) =>
    call<ScheduleInfo>('PUT', `/v1/schedules/${enc(name)}`, spec),
  deleteSchedule: (name: string) =>
    call<{ deleted: boolean }>('DELETE', `/v1/schedules/${enc(name)}`),
};
