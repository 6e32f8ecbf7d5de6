/**
 * The dashboard's calls to the server's /v1 routes. The bearer token, when the server needs one,
 * lives in sessionStorage: it is gone when the tab closes and is never put in a URL.
 */

const TOKEN_KEY = 'tickwheel.token';

export interface DashboardSnapshot {
  now: number;
  version: string;
  uptimeMs: number;
  counters: Record<string, number>;
  /** scheduled: not yet due (in memory or on disk); dead: dead letters. */
  topics: Record<string, { scheduled: number; ready: number; inflight: number; dead: number }>;
  totals: { inMemory: number; live: number | null; dead: number | null; loadedUntil: number };
  latenessMs: { p50: number | null; p99: number | null; max: number | null };
  /** Scheduled messages by time until due: [fromMs, untilMs) from now; untilMs null = beyond. */
  upcoming: Array<{ label: string; fromMs: number; untilMs: number | null; count: number }>;
  wheel: { levels: Array<{ cursor: number; slots: number[] }>; truncated: boolean };
}

export interface MessageInfo {
  id: string;
  topic: string;
  status: string;
  deliverAt: number;
  attempts: number;
}

/** The server said 401: the page asks for a token. */
export class Unauthorized extends Error {}

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

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const token = getToken();
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) throw new Unauthorized('this server needs a token');
  const json = (await response.json().catch(() => ({}))) as {
    error?: { message?: string };
  };
  if (!response.ok) {
    throw new ApiError(response.status, json.error?.message ?? `HTTP ${response.status}`);
  }
  return json as T;
}

const enc = encodeURIComponent;

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
    call<{ messages: MessageInfo[] }>('GET', `/v1/topics/${enc(topic)}/dead?limit=100`),
  requeue: (id: string) =>
    call<{ requeued: boolean }>('POST', `/v1/messages/${enc(id)}/requeue`, {}),
};
