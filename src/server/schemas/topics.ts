/** JSON Schemas of the topic routes (routes/topics.ts) and the event stream (routes/events.ts). */

import {
  MAX_PUSH_CONCURRENCY,
  MAX_PUSH_HEADERS,
  MAX_PUSH_TIMEOUT_MS,
  MAX_PUSH_URL_LENGTH,
  PUSH_METHODS,
} from '../../queue/push.js';
import { MAX_BURST, MAX_RATE_PER_SECOND, MIN_RATE_PER_SECOND } from '../../queue/topics.js';
import {
  closed,
  exact,
  PAGE_SIZE_PATTERN,
  topic,
  topicParams,
  routeSchema,
  text,
} from './common.js';

const pushMethod = { enum: PUSH_METHODS } as const;

const rateLimit = closed(['perSecond'], {
  perSecond: { type: 'number', minimum: MIN_RATE_PER_SECOND, maximum: MAX_RATE_PER_SECOND },
  burst: { type: 'integer', minimum: 1, maximum: MAX_BURST },
});

/** A push target as given (src/queue/push.ts checks the ranges and the URL). */
const pushTarget = closed(['url', 'secret'], {
  url: { type: 'string', maxLength: MAX_PUSH_URL_LENGTH, description: 'http: or https: URL' },
  method: pushMethod,
  headers: {
    type: 'object',
    maxProperties: MAX_PUSH_HEADERS,
    additionalProperties: { type: 'string' },
    description: 'Sent with every request; never read back',
  },
  timeoutMs: { type: 'integer', minimum: 1, maximum: MAX_PUSH_TIMEOUT_MS },
  concurrency: { type: 'integer', minimum: 1, maximum: MAX_PUSH_CONCURRENCY },
  secret: {
    type: 'string',
    minLength: 16,
    maxLength: 512,
    description: 'HMAC-SHA256 key of the signatures (docs/push.md); never read back',
  },
});

/** A push target as read back: no secret, the headers' names only. */
const pushTargetView = exact({
  url: { type: 'string' },
  method: pushMethod,
  headerNames: { type: 'array', items: { type: 'string' } },
  timeoutMs: { type: 'integer' },
  concurrency: { type: 'integer' },
});

const rateLimitView = exact({ perSecond: { type: 'number' }, burst: { type: 'integer' } });

const topicInfo = exact({
  topic: { type: 'string' },
  paused: { type: 'boolean' },
  rateLimit: { anyOf: [rateLimitView, { type: 'null' }] },
  push: { anyOf: [pushTargetView, { type: 'null' }] },
  pending: { type: 'integer' },
  dead: { type: 'integer' },
});

/** A route on one topic that answers with the topic as it is after the call. */
const onTopic = { params: topicParams, response: { 200: topicInfo } } as const;

export const topicListSchema = routeSchema('topics', 'listTopics', {
  summary: 'Topics with messages or settings, with their settings and counts, a page at a time',
  description: "By name. Pass the page's cursor back for the next page; the last page has none.",
  querystring: closed([], {
    // 1 to 1000 (MAX_TOPIC_PAGE), as text.
    limit: { type: 'string', pattern: PAGE_SIZE_PATTERN },
    cursor: { type: 'string', minLength: 1, maxLength: 128 },
  }),
  response: {
    200: {
      type: 'object',
      required: ['topics'],
      properties: { topics: { type: 'array', items: topicInfo }, cursor: { type: 'string' } },
    },
  },
});

export const topicGetSchema = routeSchema('topics', 'getTopic', {
  summary: "A topic's settings (paused, rateLimit, push) and counts",
  ...onTopic,
});

export const topicUpdateSchema = routeSchema('topics', 'configureTopic', {
  summary:
    "Change a topic's settings: pause it, limit its delivery rate, push its messages to a URL (durable)",
  ...onTopic,
  body: closed([], {
    paused: { type: 'boolean' },
    rateLimit: { anyOf: [rateLimit, { type: 'null' }] },
    push: { anyOf: [pushTarget, { type: 'null' }] },
  }),
});

export const topicPauseSchema = routeSchema('topics', 'pauseTopic', {
  summary: 'Stop deliveries of a topic until resumed (schedules are still accepted)',
  ...onTopic,
});

export const topicResumeSchema = routeSchema('topics', 'resumeTopic', {
  summary: "Deliver a paused topic's messages again",
  ...onTopic,
});

export const eventsSchema = routeSchema('events', 'streamEvents', {
  summary:
    'Message events as Server-Sent Events (scheduled, delivered, acked, failed, dead, cancelled)',
  querystring: closed([], { topic, types: { type: 'string', minLength: 1, maxLength: 200 } }),
  response: {
    200: text(
      'text/event-stream',
      'A text/event-stream: `event: <type>`, `id: <n>`, `data: <JSON event>`; `event: lost` ends a stream that fell behind',
    ),
  },
});
