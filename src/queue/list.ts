/**
 * list(): a topic's pending messages by key (deliverAt, seq: the backend's scheduling order,
 * id), a page at a time. The next page starts strictly after the last key, so changes between
 * pages neither repeat nor hide messages. The cursor is that key and the topic, base64url JSON.
 */

import { TickwheelRangeError, TickwheelTypeError } from '../errors.js';
import type { ListOptions, MessageInfo } from '../protocol/model.js';
import {
  checkKnownOptions,
  checkOption,
  checkOptionsObject,
  describe,
  invalidOption,
} from '../validate.js';
import { checkTopic, ID_PATTERN } from './message.js';

/** Messages a page holds by default, and at most. */
export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 1_000;
/** The longest cursor accepted: a topic, two numbers and an id, encoded, fit well within it. */
const MAX_CURSOR_CHARS = 1_024;
/** seq of a bound before, and after, every message of its due time. */
export const SEQ_BEFORE = -1;
export const SEQ_AFTER = Number.MAX_SAFE_INTEGER;

/** A place in a topic's due-time order: a message's, or a bound between messages. */
export interface ListKey {
  deliverAt: number;
  seq: number;
  id: string;
}

/** list() options checked, defaults filled in: what a backend gets. */
export interface ListQuery {
  topic: string;
  from: number;
  until: number;
  limit: number;
  /** Only messages after this key (the previous page's end). */
  after: ListKey | undefined;
}

/** A backend's page, in key order; `next`: the key the following page starts after. */
export interface BackendListPage {
  messages: MessageInfo[];
  next: ListKey | undefined;
}

/** Messages in key order: all of their source's up to `through` (undefined: all). */
export interface KeyedPart<M> {
  items: Array<{ message: M; key: ListKey }>;
  through: ListKey | undefined;
}

export function compareKeys(a: ListKey, b: ListKey): number {
  return a.deliverAt - b.deliverAt || a.seq - b.seq || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export function inRange(query: ListQuery, key: ListKey): boolean {
  return (
    key.deliverAt >= query.from &&
    key.deliverAt < query.until &&
    (query.after === undefined || compareKeys(key, query.after) > 0)
  );
}

export function checkListOptions(options: ListOptions): ListQuery {
  checkOptionsObject(options, 'list options', "{ topic: 'emails', limit: 100 }");
  checkKnownOptions(options, ['topic', 'from', 'until', 'limit', 'cursor'], 'list()');
  const topic = checkTopic(options.topic);
  const from = options.from === undefined ? -Infinity : checkOption(options.from, 'from', 0);
  const until = options.until === undefined ? Infinity : checkOption(options.until, 'until', 0);
  if (until < from) {
    throw new TickwheelRangeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `until (${until}) must not be before from (${from})`,
    );
  }
  const limit =
    options.limit === undefined
      ? LIST_DEFAULT_LIMIT
      : checkOption(options.limit, 'limit', 1, LIST_MAX_LIMIT, true);
  const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor, topic);
  return { topic, from, until, limit, after };
}

export function encodeCursor(topic: string, key: ListKey): string {
  const body = JSON.stringify({ v: 1, t: topic, d: key.deliverAt, s: key.seq, i: key.id });
  return Buffer.from(body, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: unknown, topic: string): ListKey {
  if (typeof cursor !== 'string' || cursor.length === 0 || cursor.length > MAX_CURSOR_CHARS) {
    throw badCursor(`got ${describe(cursor)}`);
  }
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw badCursor('it is not base64url text');
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw badCursor('it does not decode');
  }
  const { v, t, d, s, i } = (typeof body === 'object' && body !== null ? body : {}) as Record<
    string,
    unknown
  >;
  if (
    v !== 1 ||
    typeof t !== 'string' ||
    typeof d !== 'number' ||
    !Number.isFinite(d) ||
    typeof s !== 'number' ||
    !Number.isSafeInteger(s) ||
    s < SEQ_BEFORE ||
    typeof i !== 'string' ||
    (i !== '' && !ID_PATTERN.test(i))
  ) {
    throw badCursor('it is not a list cursor');
  }
  if (t !== topic) {
    throw badCursor(
      `it is a cursor of topic ${JSON.stringify(t)}, not of ${JSON.stringify(topic)}`,
    );
  }
  return { deliverAt: d, seq: s, id: i };
}

function badCursor(why: string): TickwheelTypeError {
  return invalidOption(
    `cursor must be the cursor of the previous page of the same list() (pass it back unchanged); ${why}`,
  );
}

/** The `keep` smallest items pushed, by key, in memory of about twice `keep`. */
export class SmallestKeys<M> {
  private items: Array<{ message: M; key: ListKey }> = [];
  cut = false;

  constructor(private readonly keep: number) {}

  push(message: M, key: ListKey): void {
    this.items.push({ message, key });
    if (this.items.length >= this.keep * 2 + 16) this.trim();
  }

  /** The items kept, in key order, as a part complete up to its last item if any were cut. */
  part(): KeyedPart<M> {
    this.trim();
    const last = this.items[this.items.length - 1];
    return { items: this.items, through: this.cut ? last.key : undefined };
  }

  private trim(): void {
    this.items.sort((a, b) => compareKeys(a.key, b.key));
    if (this.items.length > this.keep) {
      this.items.length = this.keep;
      this.cut = true;
    }
  }
}

/**
 * One page out of parts read from where a backend keeps messages. Messages past the lowest
 * `through` are dropped (another part may not have read up to them), and a message found in two
 * parts (it moved meanwhile) counts once, as the first part has it.
 */
export function mergePages<M extends { id: string }>(
  limit: number,
  parts: ReadonlyArray<KeyedPart<M>>,
): KeyedPart<M> {
  let through: ListKey | undefined;
  for (const part of parts) {
    if (
      part.through !== undefined &&
      (through === undefined || compareKeys(part.through, through) < 0)
    ) {
      through = part.through;
    }
  }
  const seen = new Set<string>();
  const kept = new SmallestKeys<M>(limit);
  for (const part of parts) {
    for (const { message, key } of part.items) {
      if (seen.has(message.id)) continue;
      seen.add(message.id);
      if (through === undefined || compareKeys(key, through) <= 0) kept.push(message, key);
    }
  }
  // Cut to `limit`: complete up to its last item; else up to the parts' lowest `through`.
  const page = kept.part();
  return page.through === undefined ? { items: page.items, through } : page;
}
