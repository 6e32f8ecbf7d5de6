/**
 * The client's side of GET /v1/events: Server-Sent Events read from a fetch body and handed out
 * as an async iterator of QueueEvent, the same objects the embedded `queue.events.watch()` gives.
 *
 * The stream ends when `signal` aborts or the client is closed (the iteration ends without an
 * error), when the server
 * closes it (shutting down: the iteration ends), or when the reader fell behind and the server
 * sent `event: lost` (the iteration throws a TickwheelHttpError with the code the server gave,
 * ERR_TICKWHEEL_EVENTS_LOST). Events are not stored: reconnecting gives what happens from then on.
 */

import type { QueueEvent, QueueEventType } from '../queue/events.js';
import type { WireErrorCode } from '../protocol/wire.js';
import { TickwheelHttpError } from './errors.js';
import { openStream, type TransportOptions } from './transport.js';

export interface ClientWatchOptions {
  topic?: string;
  types?: readonly QueueEventType[];
  signal?: AbortSignal;
}

export async function* streamEvents(
  transport: TransportOptions,
  options: ClientWatchOptions,
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
  let response: Response;
  try {
    response = await openStream(transport, path, signal);
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  }
  const body = response.body;
  if (body === null) return;
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
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
        yield JSON.parse(event.data) as QueueEvent;
      }
    }
  } catch (err) {
    if (signal.aborted && !(err instanceof TickwheelHttpError)) return;
    throw err;
  } finally {
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
