/**
 * GET /v1/events as an async iterator of the QueueEvents `queue.events.watch()` gives. The server
 * writes a keep-alive every 15 s, so `idleTimeoutMs` of silence means a server or network gone
 * without a word, which TCP alone would notice only after hours.
 */

import type { QueueEvent, QueueEventType } from '../queue/events.js';
import type { WireErrorCode } from '../protocol/wire.js';
import { overlong, TickwheelHttpError, TickwheelNetworkError } from './errors.js';
import { openStream, streamBroke, type TransportOptions } from './transport.js';
import { invalidOption } from '../validate.js';

export interface ClientWatchOptions {
  topic?: string;
  types?: readonly QueueEventType[];
  signal?: AbortSignal;
  /**
   * Longest silence (no event, no keep-alive) before the stream counts as dead and the iteration
   * throws ERR_TICKWHEEL_TIMEOUT. Default 45,000: three of the server's 15 s keep-alives.
   * Infinity waits forever.
   */
  idleTimeoutMs?: number;
}

const DEFAULT_EVENTS_IDLE_MS = 45_000;
/** The longest event block kept while it is unfinished (an event is well under 10 KB). */
export const MAX_EVENT_CHARS = 1024 * 1024;

/** Checks `idleTimeoutMs` (the rest is checked as the embedded watch() checks it). */
export function checkIdleTimeout(value: unknown): number {
  if (value === undefined) return DEFAULT_EVENTS_IDLE_MS;
  if (typeof value !== 'number' || Number.isNaN(value) || value <= 0) {
    throw invalidOption(
      `idleTimeoutMs must be a positive number of ms (or Infinity), got ${String(value)}`,
    );
  }
  return value;
}

export async function* streamEvents(
  transport: TransportOptions,
  options: ClientWatchOptions,
  idleMs: number,
  /** Open streams of the client, so that its close() ends them. */
  open: Set<AbortController>,
): AsyncGenerator<QueueEvent, void, undefined> {
  const query = new URLSearchParams();
  if (options.topic !== undefined) query.set('topic', options.topic);
  if (options.types !== undefined) query.set('types', options.types.join(','));
  const path = `/v1/events${query.size > 0 ? `?${query}` : ''}`;
  // The caller's signal, or ours: a `return()` (break out of the loop) must close the request.
  const own = new AbortController();
  open.add(own);
  const signal =
    options.signal === undefined ? own.signal : AbortSignal.any([own.signal, options.signal]);
  // Aborts the request after a silence; re-armed by every chunk. Silence counts only while this
  // side waits for bytes, so a slow handler of an event is not taken for a dead server.
  const idle = new AbortController();
  let idleTimer: ReturnType<typeof setTimeout> | undefined;
  const listen = () => {
    clearTimeout(idleTimer);
    if (idleMs !== Infinity) {
      idleTimer = setTimeout(() => idle.abort(), Math.min(idleMs, 2 ** 31 - 1));
    }
  };
  listen();
  const decoder = new TextDecoder();
  let text = '';
  try {
    const response = await openStream(transport, path, AbortSignal.any([signal, idle.signal]));
    if (response.body === null) return;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      listen();
      text += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = text.indexOf('\n\n')) !== -1) {
        const block = text.slice(0, end);
        text = text.slice(end + 2);
        const event = parseBlock(block);
        if (event === undefined) continue;
        if (event.name === 'lost') {
          const { error } = JSON.parse(event.data) as {
            error: { code: WireErrorCode; message: string };
          };
          throw new TickwheelHttpError(200, error.code, error.message, { error });
        }
        clearTimeout(idleTimer);
        yield JSON.parse(event.data) as QueueEvent;
        listen();
      }
      if (text.length > MAX_EVENT_CHARS) throw overlong(`GET ${path}`, MAX_EVENT_CHARS);
    }
  } catch (err) {
    // The `lost` event; an error answer to the request itself has a status other than 200.
    if (err instanceof TickwheelHttpError && err.status === 200) throw err;
    if (signal.aborted) return;
    if (idle.signal.aborted) {
      const silence = `GET ${path}: nothing came for ${idleMs} ms, not even a keep-alive: the stream is taken for dead`;
      throw new TickwheelNetworkError('ERR_TICKWHEEL_TIMEOUT', silence, err);
    }
    throw streamBroke(`the event stream GET ${path}`, err);
  } finally {
    clearTimeout(idleTimer);
    own.abort();
    open.delete(own);
  }
}

/** One SSE block: its event name and data; undefined for comments (keep-alives). */
function parseBlock(block: string): { name: string; data: string } | undefined {
  let name = 'message';
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
  }
  return data.length === 0 ? undefined : { name, data: data.join('\n') };
}
