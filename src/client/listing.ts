/**
 * list() over HTTP: the query of GET /v1/topics/:topic/messages, and a walk over every page.
 * The options are checked with the embedded queue's own check, so a bad one fails the same way
 * before any request; the values sent are the caller's, and the server checks them again.
 */

import type { ListOptions, ListPage, MessageInfo } from '../protocol/model.js';
import { checkListOptions } from '../queue/list.js';
import { segment } from './bodies.js';

/** The path and query of one page of `options`. */
export function listPath(options: ListOptions): string {
  checkListOptions(options);
  const query = new URLSearchParams();
  if (options.from !== undefined) query.set('from', String(options.from));
  if (options.until !== undefined) query.set('until', String(options.until));
  if (options.limit !== undefined) query.set('limit', String(options.limit));
  if (options.cursor !== undefined) query.set('cursor', options.cursor);
  const text = query.toString();
  return `/v1/topics${segment(options.topic, 'topic')}/messages${text === '' ? '' : `?${text}`}`;
}

/**
 * Every message of `options`, page after page from `options.cursor` (or the start), in due-time
 * order. A page is asked for only once the previous one has been consumed, so breaking out of
 * the loop stops the requests.
 */
export async function* walkPages(
  options: ListOptions,
  page: (options: ListOptions) => Promise<ListPage>,
): AsyncGenerator<MessageInfo, void, undefined> {
  let cursor = options.cursor;
  do {
    const next = await page(cursor === undefined ? options : { ...options, cursor });
    yield* next.messages;
    cursor = next.cursor;
  } while (cursor !== undefined);
}
