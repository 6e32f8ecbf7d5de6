/** The client's options, checked when a TickwheelClient is made. */

import {
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  describe,
  invalidOption,
  optionNames,
} from '../validate.js';
import type { TransportOptions } from './transport.js';

export interface ClientOptions {
  /** Base URL of the server. Default http://127.0.0.1:7700. */
  url?: string;
  /** Bearer token, when the server was started with one. */
  token?: string;
  /** Time allowed for one request, in ms; a long poll gets its waitMs on top. Default 10,000. */
  timeoutMs?: number;
  /** Retries after a network error, for requests that are safe to repeat. Default 2. */
  retries?: number;
  /** Wait before the first retry, doubled for each further one. Default 100 ms. */
  retryDelayMs?: number;
  /** The fetch to use (for instance one with your own undici dispatcher). Default: global fetch. */
  fetch?: typeof globalThis.fetch;
}

/** The longest time a timer can wait (Node's limit): a longer one would fire after 1 ms. */
export const MAX_TIMEOUT_MS = 2_147_483_647;

/** A call's `timeoutMs`, checked like the client's own; undefined when not given. */
export function callTimeout(options: CallOptions): number | undefined {
  const { timeoutMs } = options;
  return timeoutMs === undefined
    ? undefined
    : checkOption(timeoutMs, 'timeoutMs', 1, MAX_TIMEOUT_MS);
}

/** Per-call options of every method. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** ack() and ackMany(): a call's options, and whether to wait until the ack is durable. */
export interface AckCallOptions extends CallOptions {
  /** Answered once the ack survives a crash. Default: the server's `durableAcks` (false). */
  durable?: boolean;
}

export const DEFAULT_URL = 'http://127.0.0.1:7700';

const CLIENT_OPTIONS = optionNames<ClientOptions>({
  url: true,
  token: true,
  timeoutMs: true,
  retries: true,
  retryDelayMs: true,
  fetch: true,
});

/**
 * The server's URL: http:// or https:// only. `localhost:7700` parses as a URL of the scheme
 * `localhost:`, so that without this every call would fail as a network error.
 */
function checkUrl(url: unknown): string {
  let protocol: string | undefined;
  try {
    protocol = new URL(url as string).protocol;
  } catch {
    // Not a URL at all: refused below.
  }
  if (typeof url === 'string' && (protocol === 'http:' || protocol === 'https:')) return url;
  const hint =
    typeof url === 'string' && !url.includes('://') ? ` (http://${url} if that was meant)` : '';
  throw invalidOption(
    `url must be an absolute http:// or https:// URL such as ${DEFAULT_URL}, got ${describe(url)}${hint}`,
  );
}

export function checkClientOptions(options: ClientOptions): TransportOptions {
  if (typeof options === 'string') {
    throw invalidOption(
      `new TickwheelClient() takes options, not a URL: pass { url: ${JSON.stringify(options)} }`,
    );
  }
  checkOptionsObject(options, 'new TickwheelClient() options', `{ url: '${DEFAULT_URL}' }`);
  checkKnownOptions(options, CLIENT_OPTIONS, 'new TickwheelClient()');
  const url = checkUrl(options.url ?? DEFAULT_URL);
  if (
    options.token !== undefined &&
    (typeof options.token !== 'string' || !/^[\x21-\x7e]*$/.test(options.token))
  ) {
    throw invalidOption(
      'token must be printable ASCII without spaces (it is sent in the Authorization header)',
    );
  }
  const fetchFn =
    options.fetch ??
    (typeof globalThis.fetch === 'function'
      ? (input: string | URL | Request, init?: RequestInit) => globalThis.fetch(input, init)
      : undefined);
  if (typeof fetchFn !== 'function') {
    throw invalidOption('no fetch available: use Node 20 or later, or pass options.fetch');
  }
  return {
    url,
    token: options.token === '' ? undefined : options.token,
    timeoutMs: checkOption(options.timeoutMs ?? 10_000, 'timeoutMs', 1, MAX_TIMEOUT_MS),
    retries: checkOption(options.retries ?? 2, 'retries', 0, 100, true),
    retryDelayMs: checkOption(options.retryDelayMs ?? 100, 'retryDelayMs', 0, 60_000),
    fetch: fetchFn,
  };
}
