/** JSON Schemas of the message and delivery routes (routes/messages.ts, routes/deliveries.ts). */

import {
  MAX_BATCH,
  MAX_NACK_DELAY_MS,
  MAX_RECEIPT_LENGTH,
  MAX_RECEIVE,
  MAX_RECEIVE_BYTES,
  MAX_VISIBILITY_MS,
  MAX_WAIT_MS,
} from '../../protocol/limits.js';
import { MAX_DELAY_MS } from '../../queue/message.js';
import { MAX_TRACESTATE_CHARS } from '../../protocol/trace-context.js';
import {
  backoff,
  closed,
  done,
  errorBody,
  errorDetail,
  id,
  idParams,
  listOf,
  maxAttempts,
  object,
  PAGE_SIZE_PATTERN,
  payload,
  topic,
  topicParams,
  routeSchema,
  text,
} from './common.js';

const payloadEncoding = { enum: ['json', 'base64'] } as const;

/** A W3C trace context as stored and handed out. */
const trace = closed(['traceparent'], {
  traceparent: { type: 'string', maxLength: MAX_TRACESTATE_CHARS },
  tracestate: { type: 'string', maxLength: 2 * MAX_TRACESTATE_CHARS },
});

/**
 * A trace context as a schedule gives it: its values are checked by the queue, which drops a
 * malformed or missing traceparent.
 */
const givenTrace = closed([], {
  traceparent: { type: 'string' },
  tracestate: { type: 'string' },
});

const messageProperties = {
  payload,
  payloadEncoding,
  delayMs: { type: 'number', maximum: MAX_DELAY_MS },
  deliverAt: { type: 'number', minimum: 0 },
  id,
  maxAttempts,
  backoff,
  trace: givenTrace,
} as const;

const scheduleResult = object({ id: { type: 'string' }, deliverAt: { type: 'number' } });

const messageInfo = object(
  {
    id: { type: 'string' },
    topic: { type: 'string' },
    status: {
      type: 'string',
      enum: ['scheduled', 'ready', 'inflight', 'acked', 'cancelled', 'dead'],
    },
    deliverAt: { type: 'number' },
    attempts: { type: 'number' },
    lastError: { type: 'string' },
  },
  'lastError',
);

const receivedMessage = object(
  {
    id: { type: 'string' },
    topic: { type: 'string' },
    payload,
    payloadEncoding,
    deliverAt: { type: 'number' },
    attempts: { type: 'number' },
    receipt: { type: 'string' },
    trace,
  },
  'payloadEncoding',
  'trace',
);

const receipts = {
  type: 'array',
  minItems: 1,
  maxItems: MAX_BATCH,
  items: { type: 'string', minLength: 1, maxLength: MAX_RECEIPT_LENGTH },
} as const;

/** The answer of ack and nack: how many receipts were live deliveries, and which (in order). */
function receiptResults<const Count extends string>(count: Count) {
  const counted = { [count]: { type: 'number' } } as { [key in Count]: { type: 'number' } };
  const results = { type: 'array', items: { type: 'boolean' } } as const;
  return object({ ...counted, results });
}

export const scheduleSchema = routeSchema('messages', 'schedule', {
  summary: 'Schedule a message',
  description: 'Answers once the message is as durable as the fsync policy of the server promises.',
  params: topicParams,
  body: closed(['payload'], messageProperties),
  response: { 201: scheduleResult, 413: errorBody },
});

/**
 * A batch some of whose messages the queue refused: the status of the first refusal, and one
 * entry per message (the others are scheduled). A batch refused whole has no `results`.
 */
const batchErrorBody = {
  type: 'object',
  required: ['error'],
  properties: {
    error: errorDetail,
    results: { type: 'array', items: { anyOf: [scheduleResult, errorBody] } },
  },
} as const;

export const batchSchema = routeSchema('messages', 'scheduleMany', {
  summary: 'Schedule a batch of messages',
  body: closed(['messages'], {
    messages: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_BATCH,
      items: closed(['topic', 'payload'], { topic, ...messageProperties }),
    },
  }),
  response: {
    201: listOf('results', scheduleResult),
    400: batchErrorBody,
    409: batchErrorBody,
    413: batchErrorBody,
    500: batchErrorBody,
    503: batchErrorBody,
  },
});

export const getSchema = routeSchema('messages', 'getMessage', {
  summary: 'Look up a message',
  params: idParams,
  response: { 200: messageInfo, 404: errorBody },
});

export const cancelSchema = routeSchema('messages', 'cancel', {
  summary: 'Cancel a message that is not finished',
  params: idParams,
  response: { 200: done('cancelled'), 404: errorBody },
});

export const rescheduleSchema = routeSchema('messages', 'reschedule', {
  summary: 'Move a scheduled or ready message to a new due time',
  params: idParams,
  body: closed([], { delayMs: messageProperties.delayMs, deliverAt: messageProperties.deliverAt }),
  response: {
    200: done('rescheduled', { deliverAt: { type: 'number' } }),
    404: errorBody,
    409: errorBody,
  },
});

/**
 * A time in a query string (epoch ms): query values are not coerced, so a number is a pattern,
 * 16 digits at most (past the year 300,000), with up to 6 decimals.
 */
const epochMsText = {
  type: 'string',
  pattern: '^(?:0|[1-9][0-9]{0,15})(?:\\.[0-9]{1,6})?$',
} as const;

export const listSchema = routeSchema('messages', 'list', {
  summary: "Browse a topic's pending messages in due-time order, a page at a time",
  description:
    'Scheduled, ready and in-flight messages due in [from, until), ordered by due time. Pass ' +
    "the page's cursor back for the next page; the last page has none. A page may hold fewer " +
    'than limit messages (even none) and still carry a cursor.',
  params: topicParams,
  querystring: closed([], {
    from: { ...epochMsText, description: 'Due at or after this (epoch ms)' },
    until: { ...epochMsText, description: 'Due before this (epoch ms)' },
    // 1 to 1000 (LIST_MAX_LIMIT), as text.
    limit: { type: 'string', pattern: PAGE_SIZE_PATTERN },
    // The queue checks the rest (src/queue/list.ts: base64url, at most 1,024 characters).
    cursor: { type: 'string', minLength: 1, maxLength: 1024, pattern: '^[A-Za-z0-9_-]+$' },
  }),
  response: {
    200: {
      type: 'object',
      required: ['messages'],
      properties: { messages: { type: 'array', items: messageInfo }, cursor: { type: 'string' } },
    },
  },
});

export const receiveSchema = routeSchema('deliveries', 'receive', {
  summary: 'Receive ready messages of a topic (long poll)',
  params: topicParams,
  body: closed([], {
    max: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE },
    waitMs: { type: 'number', minimum: 0, maximum: MAX_WAIT_MS },
    visibilityMs: { type: 'number', minimum: 1, maximum: MAX_VISIBILITY_MS },
    maxBytes: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE_BYTES },
  }),
  response: { 200: listOf('messages', receivedMessage) },
});

export const streamSchema = routeSchema('deliveries', 'stream', {
  summary: 'Receive ready messages of a topic on one open response, as they become ready',
  params: topicParams,
  body: closed(['window'], {
    window: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE },
    visibilityMs: { type: 'number', minimum: 1, maximum: MAX_VISIBILITY_MS },
    maxBytes: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE_BYTES },
  }),
  response: {
    200: text(
      'application/x-ndjson',
      'NDJSON: a line `{"messages":[...]}` per batch of deliveries; an empty one every 15 s while nothing is ready',
    ),
  },
});

export const ackSchema = routeSchema('deliveries', 'ack', {
  summary: 'Acknowledge deliveries',
  body: closed(['receipts'], { receipts, durable: { type: 'boolean' } }),
  response: { 200: receiptResults('acked') },
});

export const nackSchema = routeSchema('deliveries', 'nack', {
  summary: 'Give deliveries back for redelivery',
  body: closed(['receipts'], {
    receipts,
    delayMs: { type: 'number', minimum: 0, maximum: MAX_NACK_DELAY_MS },
    reason: { type: 'string', maxLength: 10_000 },
    durable: { type: 'boolean' },
  }),
  response: { 200: receiptResults('nacked') },
});

export const deadLettersSchema = routeSchema('deliveries', 'deadLetters', {
  summary: 'List the dead letters of a topic, oldest first',
  params: topicParams,
  // A string, since query values are not coerced: 1 to 10000.
  querystring: closed([], { limit: { type: 'string', pattern: '^(?:[1-9][0-9]{0,3}|10000)$' } }),
  response: { 200: listOf('messages', messageInfo) },
});

export const requeueSchema = routeSchema('messages', 'requeue', {
  summary: 'Put a dead letter back in the queue',
  params: idParams,
  body: closed([], { delayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS } }),
  response: { 200: done('requeued'), 404: errorBody, 409: errorBody },
});
