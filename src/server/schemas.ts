/**
 * JSON Schemas of every route. Input is checked strictly: no type coercion, no unknown
 * properties (a typo such as `delay` for `delayMs` must not silently mean "deliver now"), and
 * bounds on every string, number and array, so that nothing a caller sends can make the
 * server do unbounded work. The queue checks the same things again; these schemas exist to
 * answer early, with the path of the offending field, and to bound work before it starts.
 *
 * Every route also has a response schema for each status it answers with, errors included.
 * Fastify serialises with them (a compiled function per status), and GET /openapi.json is
 * generated from them (openapi.ts): they are the one description of what the server returns.
 * Fastify drops a property a response schema does not list, so each lists every property its
 * route sends, and content that is open by design (stats) says `additionalProperties: true`.
 * The annotations `operationId`, `summary`, `description` and `tags` are for the document;
 * Fastify ignores them.
 *
 * The error answers that come from around a route (the token, the Host check, the body
 * parser, the server opening or closing) are added to every route's schema where the hook
 * that gives them is installed (server.ts, with declareErrors() below); a route lists here the
 * errors of its own handler.
 */

import type { RouteOptions } from 'fastify';

import {
  MAX_BATCH,
  MAX_NACK_DELAY_MS,
  MAX_RECEIPT_LENGTH,
  MAX_RECEIVE,
  MAX_RECEIVE_BYTES,
  MAX_VISIBILITY_MS,
  MAX_WAIT_MS,
} from '../protocol/limits.js';
import { ID_PATTERN, MAX_DELAY_MS, TOPIC_PATTERN } from '../queue/message.js';
import { MAX_BURST, MAX_RATE_PER_SECOND, MIN_RATE_PER_SECOND } from '../queue/topics.js';
import {
  MAX_PUSH_CONCURRENCY,
  MAX_PUSH_HEADERS,
  MAX_PUSH_TIMEOUT_MS,
  MAX_PUSH_URL_LENGTH,
  PUSH_METHODS,
} from '../queue/push.js';
import {
  MAX_EVERY_MS,
  MIN_EVERY_MS,
  SCHEDULE_NAME_PATTERN,
  SPEC_FIELDS,
} from '../queue/recurring-spec.js';

const topic = { type: 'string', minLength: 1, maxLength: 128, pattern: TOPIC_PATTERN.source };
const id = { type: 'string', minLength: 1, maxLength: 200, pattern: ID_PATTERN.source };

/** The groups of /openapi.json, in the order it lists them. */
export const API_TAGS = [
  { name: 'messages', description: 'Schedule, look up, cancel, reschedule and requeue messages' },
  { name: 'deliveries', description: 'Receive (long poll), ack and nack deliveries; dead letters' },
  { name: 'operations', description: 'Stats, health, Prometheus metrics and this document' },
  { name: 'dashboard', description: 'The web dashboard and the JSON it draws' },
  { name: 'topics', description: "Topics' settings: pause, resume, rate limits; their counts" },
  { name: 'events', description: 'Message events as Server-Sent Events' },
  {
    name: 'schedules',
    description: 'Recurring schedules: cron or intervals, each occurrence a message',
  },
];

// ---- errors -------------------------------------------------------------------------------

const errorDetail = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: {
      type: 'string',
      pattern: '^[A-Z][A-Z0-9_]*$',
      description: 'An ERR_TICKWHEEL_* code, stable across versions (docs/http-api.md#errors)',
    },
    message: { type: 'string', description: 'What went wrong and what to change, for people' },
    outcome: {
      type: 'string',
      enum: ['none', 'unknown'],
      description:
        "Whether the request took effect: 'none', nothing was changed; 'unknown', it may have " +
        'been (docs/http-api.md#retries)',
    },
    id: {
      type: 'string',
      description:
        "With outcome 'unknown': the message id, schedule name or topic the request may have written",
    },
    ids: {
      type: 'array',
      items: { type: 'string' },
      description:
        "With outcome 'unknown', for a batch: the ids of the messages it may have written",
    },
    retry: {
      type: 'string',
      enum: ['same-id'],
      description: 'Present when sending the same request again with that id is safe',
    },
  },
};

/**
 * Every error answer (errors.ts): `{ error: { code, message, outcome } }`. A shared schema, which
 * server.ts adds before any route: routes refer to it (errorBody), and /openapi.json has it
 * once, as components/schemas/Error.
 */
export const ERROR_SCHEMA = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: { error: errorDetail },
};

export const errorBody = { $ref: 'Error#' };

/**
 * Error answers a route gives besides its own, because of something around it: a hook, the
 * body parser, the router. An onRoute hook that adds `errorBody` for `statuses` to the routes
 * `applies` picks (all by default); a status the route's schema already has keeps its own.
 * The route's schema is replaced, not changed: schemas are shared between routes.
 */
export function declareErrors(
  statuses: readonly number[],
  applies: (route: RouteOptions) => boolean = () => true,
): (route: RouteOptions) => void {
  return (route) => {
    if (!applies(route)) return;
    const declared = Object.fromEntries(statuses.map((status) => [status, errorBody]));
    const schema = route.schema ?? {};
    route.schema = { ...schema, response: { ...declared, ...(schema.response as object) } };
  };
}

/** Whether Fastify reads a body for the route's method(s), and so may refuse it. */
export function readsBody(route: RouteOptions): boolean {
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  return methods.some((method) => !['GET', 'HEAD', 'TRACE'].includes(method));
}

/** Whether the route validates any input (a 400 when it does not match). */
export function validatesInput(route: RouteOptions): boolean {
  const schema = route.schema ?? {};
  return ['params', 'querystring', 'body', 'headers'].some(
    (part) => (schema as Record<string, unknown>)[part] !== undefined,
  );
}

/** Whether the route's path has parameters: a malformed or over-long one is refused. */
export function hasPathParams(route: RouteOptions): boolean {
  const url = route.url.replace(/::/g, '');
  return url.includes(':') || url.includes('*');
}

// ---- messages -----------------------------------------------------------------------------

const backoff = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'delayMs'],
  properties: {
    type: { enum: ['fixed', 'exponential'] },
    delayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS },
    jitter: { type: 'number', minimum: 0, maximum: 1 },
    maxDelayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS },
  },
};

const messageProperties = {
  payload: {},
  payloadEncoding: { enum: ['json', 'base64'] },
  delayMs: { type: 'number', maximum: MAX_DELAY_MS },
  deliverAt: { type: 'number', minimum: 0 },
  id,
  maxAttempts: { type: 'integer', minimum: 1, maximum: 10_000 },
  backoff,
};

const message = {
  type: 'object',
  additionalProperties: false,
  required: ['payload'],
  properties: messageProperties,
};

const scheduleResult = {
  type: 'object',
  required: ['id', 'deliverAt'],
  properties: { id: { type: 'string' }, deliverAt: { type: 'number' } },
};

const messageInfo = {
  type: 'object',
  required: ['id', 'topic', 'status', 'deliverAt', 'attempts'],
  properties: {
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
};

const receipts = {
  type: 'array',
  minItems: 1,
  maxItems: MAX_BATCH,
  items: { type: 'string', minLength: 1, maxLength: MAX_RECEIPT_LENGTH },
};

const topicParams = {
  type: 'object',
  required: ['topic'],
  properties: { topic },
};

const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id },
};

const results = { type: 'array', items: { type: 'boolean' } };

/** `{ <flag>: true }`, the answer of an operation that has nothing else to say. */
function done(flag: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'object',
    required: [flag, ...Object.keys(extra)],
    properties: { [flag]: { type: 'boolean', const: true }, ...extra },
  };
}

export const scheduleSchema = {
  operationId: 'schedule',
  summary: 'Schedule a message',
  description: 'Answers once the message is as durable as the fsync policy of the server promises.',
  tags: ['messages'],
  params: topicParams,
  body: message,
  response: { 201: scheduleResult, 413: errorBody },
};

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
};

export const batchSchema = {
  operationId: 'scheduleMany',
  summary: 'Schedule a batch of messages',
  tags: ['messages'],
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['messages'],
    properties: {
      messages: {
        type: 'array',
        minItems: 1,
        maxItems: MAX_BATCH,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['topic', 'payload'],
          properties: { topic, ...messageProperties },
        },
      },
    },
  },
  response: {
    201: {
      type: 'object',
      required: ['results'],
      properties: { results: { type: 'array', items: scheduleResult } },
    },
    400: batchErrorBody,
    409: batchErrorBody,
    413: batchErrorBody,
    500: batchErrorBody,
    503: batchErrorBody,
  },
};

export const getSchema = {
  operationId: 'getMessage',
  summary: 'Look up a message',
  tags: ['messages'],
  params: idParams,
  response: { 200: messageInfo, 404: errorBody },
};

export const cancelSchema = {
  operationId: 'cancel',
  summary: 'Cancel a message that is not finished',
  tags: ['messages'],
  params: idParams,
  response: { 200: done('cancelled'), 404: errorBody },
};

export const rescheduleSchema = {
  operationId: 'reschedule',
  summary: 'Move a scheduled or ready message to a new due time',
  tags: ['messages'],
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: {
      delayMs: messageProperties.delayMs,
      deliverAt: messageProperties.deliverAt,
    },
  },
  response: {
    200: done('rescheduled', { deliverAt: { type: 'number' } }),
    404: errorBody,
    409: errorBody,
  },
};

export const receiveSchema = {
  operationId: 'receive',
  summary: 'Receive ready messages of a topic (long poll)',
  tags: ['deliveries'],
  params: topicParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: {
      max: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE },
      waitMs: { type: 'number', minimum: 0, maximum: MAX_WAIT_MS },
      visibilityMs: { type: 'number', minimum: 1, maximum: MAX_VISIBILITY_MS },
      maxBytes: { type: 'integer', minimum: 1, maximum: MAX_RECEIVE_BYTES },
    },
  },
  response: {
    200: {
      type: 'object',
      required: ['messages'],
      properties: {
        messages: {
          type: 'array',
          items: {
            type: 'object',
            required: ['id', 'topic', 'payload', 'deliverAt', 'attempts', 'receipt'],
            properties: {
              id: { type: 'string' },
              topic: { type: 'string' },
              payload: {},
              payloadEncoding: { type: 'string' },
              deliverAt: { type: 'number' },
              attempts: { type: 'number' },
              receipt: { type: 'string' },
            },
          },
        },
      },
    },
  },
};

export const ackSchema = {
  operationId: 'ack',
  summary: 'Acknowledge deliveries',
  tags: ['deliveries'],
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['receipts'],
    properties: { receipts },
  },
  response: {
    200: {
      type: 'object',
      required: ['acked', 'results'],
      properties: { acked: { type: 'number' }, results },
    },
  },
};

export const nackSchema = {
  operationId: 'nack',
  summary: 'Give deliveries back for redelivery',
  tags: ['deliveries'],
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['receipts'],
    properties: {
      receipts,
      delayMs: { type: 'number', minimum: 0, maximum: MAX_NACK_DELAY_MS },
      reason: { type: 'string', maxLength: 10_000 },
    },
  },
  response: {
    200: {
      type: 'object',
      required: ['nacked', 'results'],
      properties: { nacked: { type: 'number' }, results },
    },
  },
};

export const deadLettersSchema = {
  operationId: 'deadLetters',
  summary: 'List the dead letters of a topic, oldest first',
  tags: ['deliveries'],
  params: topicParams,
  querystring: {
    type: 'object',
    additionalProperties: false,
    // A string, since query values are not coerced: 1 to 10000.
    properties: { limit: { type: 'string', pattern: '^(?:[1-9][0-9]{0,3}|10000)$' } },
  },
  response: {
    200: {
      type: 'object',
      required: ['messages'],
      properties: { messages: { type: 'array', items: messageInfo } },
    },
  },
};

export const requeueSchema = {
  operationId: 'requeue',
  summary: 'Put a dead letter back in the queue',
  tags: ['messages'],
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: { delayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS } },
  },
  response: { 200: done('requeued'), 404: errorBody, 409: errorBody },
};

// ---- operations ---------------------------------------------------------------------------

const nullableNumber = { type: ['number', 'null'] };
/** An object whose content is open: the properties listed, and whatever else the queue adds. */
const open = { type: 'object', additionalProperties: true };
const counter = { type: 'number' };

/**
 * The queue's stats() plus the server's figures. Open at every level: stats() differs between
 * a queue on one machine and one on Valkey/Redis, and grows new figures.
 */
export const statsSchema = {
  operationId: 'stats',
  summary: 'Counters, messages by topic, lateness, store and server figures',
  tags: ['operations'],
  response: {
    200: {
      ...open,
      required: ['topics', 'recovery', 'server'],
      properties: {
        scheduled: counter,
        deduplicated: counter,
        fired: counter,
        delivered: counter,
        acked: counter,
        nacked: counter,
        expired: counter,
        dead: counter,
        cancelled: counter,
        rescheduled: counter,
        latenessMs: {
          ...open,
          description:
            'Fire lateness (due to ready): the last 4096 messages; count, sum since start',
          properties: { p50: nullableNumber, p99: nullableNumber, max: nullableNumber },
        },
        deliveryLatenessMs: {
          ...open,
          description: 'First-delivery lateness: cumulative [upper bound ms, count] buckets',
        },
        inMemory: counter,
        loadedUntil: counter,
        topics: {
          type: 'object',
          description: 'Live messages of each topic by state',
          additionalProperties: open,
        },
        timers: open,
        store: { ...open, description: 'Figures of the store (one machine)' },
        totals: { ...open, description: 'Messages by state (a queue on Valkey/Redis)' },
        cluster: { ...open, description: 'The cluster as this node sees it (Valkey/Redis)' },
        recovery: {
          type: ['object', 'null'],
          additionalProperties: true,
          description: 'What the last start recovered from the data directory',
        },
        server: {
          type: 'object',
          required: ['version', 'uptimeMs', 'maxWaitMs'],
          properties: {
            version: { type: 'string' },
            uptimeMs: { type: 'number' },
            maxWaitMs: { type: 'number' },
          },
        },
      },
    },
  },
};

const healthNotOk = {
  type: 'object',
  required: ['status', 'reason'],
  properties: {
    status: { type: 'string', enum: ['recovering', 'failed', 'stopped', 'unavailable'] },
    reason: { type: 'string' },
  },
};

export const healthSchema = {
  operationId: 'health',
  summary: 'Whether the server takes writes',
  tags: ['operations'],
  response: {
    200: {
      description: 'The queue takes writes',
      type: 'object',
      required: ['status'],
      properties: { status: { type: 'string', const: 'ok' } },
    },
    503: {
      description: 'Recovering, stopped, failed to open, Valkey/Redis not answering; or closing',
      anyOf: [healthNotOk, errorBody],
    },
  },
};

export const metricsSchema = {
  operationId: 'metrics',
  summary: 'The figures of the queue and the server, for Prometheus',
  tags: ['operations'],
  response: {
    200: {
      description: 'Prometheus text format (version=0.0.4)',
      content: { 'text/plain': { schema: { type: 'string' } } },
    },
  },
};

export const openApiSchema = {
  operationId: 'openApi',
  summary: 'This document: OpenAPI 3.1, generated from the schemas of the routes',
  tags: ['operations'],
  response: {
    200: {
      description: 'An OpenAPI 3.1 document',
      ...open,
      required: ['openapi', 'info', 'paths'],
      properties: { openapi: { type: 'string' }, info: open, paths: open },
    },
  },
};

// ---- dashboard ----------------------------------------------------------------------------

const topicCounts = {
  type: 'object',
  required: ['scheduled', 'ready', 'inflight', 'dead'],
  properties: { scheduled: counter, ready: counter, inflight: counter, dead: counter },
};

/** DashboardSnapshot (dashboard routes): everything the page draws, in one answer. */
export const dashboardSchema = {
  operationId: 'dashboard',
  summary: 'One snapshot of what the dashboard draws (built at most once a second)',
  tags: ['dashboard'],
  response: {
    200: {
      type: 'object',
      required: [
        'now',
        'version',
        'uptimeMs',
        'counters',
        'topics',
        'totals',
        'latenessMs',
        'upcoming',
        'wheel',
        'cluster',
      ],
      properties: {
        now: { type: 'number' },
        version: { type: 'string' },
        uptimeMs: { type: 'number' },
        counters: { type: 'object', additionalProperties: counter },
        topics: { type: 'object', additionalProperties: topicCounts },
        totals: {
          type: 'object',
          required: ['inMemory', 'live', 'dead', 'loadedUntil'],
          properties: {
            inMemory: counter,
            live: nullableNumber,
            dead: nullableNumber,
            loadedUntil: { type: 'number' },
          },
        },
        latenessMs: {
          type: 'object',
          required: ['p50', 'p99', 'max'],
          properties: { p50: nullableNumber, p99: nullableNumber, max: nullableNumber },
        },
        upcoming: {
          type: 'array',
          items: {
            type: 'object',
            required: ['label', 'fromMs', 'untilMs', 'count'],
            properties: {
              label: { type: 'string' },
              fromMs: { type: 'number' },
              untilMs: nullableNumber,
              count: counter,
            },
          },
        },
        wheel: {
          type: 'object',
          required: ['levels', 'truncated'],
          properties: {
            levels: {
              type: 'array',
              items: {
                type: 'object',
                required: ['cursor', 'slots', 'slotsPerCell'],
                properties: {
                  cursor: { type: 'number' },
                  slots: { type: 'array', items: counter },
                  slotsPerCell: { type: 'number' },
                },
              },
            },
            truncated: { type: 'boolean' },
          },
        },
        cluster: {
          description: 'Null on one machine; on Valkey/Redis, the nodes and their partitions',
          type: ['object', 'null'],
          required: ['node', 'queue', 'partitions', 'durability', 'nodes', 'leaseChanges'],
          properties: {
            node: { type: 'string' },
            queue: { type: 'string' },
            partitions: { type: 'number' },
            durability: { type: 'string' },
            nodes: {
              type: 'array',
              items: {
                type: 'object',
                required: ['node', 'partitions', 'alive'],
                properties: {
                  node: { type: 'string' },
                  partitions: { type: 'array', items: { type: 'number' } },
                  alive: { type: 'boolean' },
                },
              },
            },
            leaseChanges: counter,
          },
        },
      },
    },
  },
};

export const previewSchema = {
  operationId: 'payloadPreview',
  summary: 'The start of the payload of a live or dead message, for people',
  tags: ['dashboard'],
  params: idParams,
  response: {
    200: {
      type: 'object',
      required: ['preview', 'truncated'],
      properties: { preview: { type: 'string' }, truncated: { type: 'boolean' } },
    },
    404: errorBody,
  },
};

export const dashboardPageSchema = {
  operationId: 'dashboardPage',
  summary: 'The web dashboard',
  tags: ['dashboard'],
  response: {
    200: {
      description: 'The page (a placeholder in a checkout that has not built the dashboard)',
      content: { 'text/html': { schema: { type: 'string' } } },
    },
  },
};

// ---- topics (src/queue/topics.ts) ---------------------------------------------------------

const rateLimit = {
  type: 'object',
  additionalProperties: false,
  required: ['perSecond'],
  properties: {
    perSecond: { type: 'number', minimum: MIN_RATE_PER_SECOND, maximum: MAX_RATE_PER_SECOND },
    burst: { type: 'integer', minimum: 1, maximum: MAX_BURST },
  },
};

/** A push target as given (src/queue/push.ts checks the ranges and the URL). */
const pushTarget = {
  type: 'object',
  additionalProperties: false,
  required: ['url', 'secret'],
  properties: {
    url: { type: 'string', maxLength: MAX_PUSH_URL_LENGTH, description: 'http: or https: URL' },
    method: { enum: PUSH_METHODS },
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
  },
};

/** A push target as read back: no secret, the headers' names only. */
const pushTargetView = {
  type: 'object',
  additionalProperties: false,
  required: ['url', 'method', 'headerNames', 'timeoutMs', 'concurrency'],
  properties: {
    url: { type: 'string' },
    method: { enum: PUSH_METHODS },
    headerNames: { type: 'array', items: { type: 'string' } },
    timeoutMs: { type: 'integer' },
    concurrency: { type: 'integer' },
  },
};

const topicInfo = {
  type: 'object',
  additionalProperties: false,
  required: ['topic', 'paused', 'rateLimit', 'push', 'pending', 'dead'],
  properties: {
    topic: { type: 'string' },
    paused: { type: 'boolean' },
    rateLimit: {
      anyOf: [
        {
          type: 'object',
          additionalProperties: false,
          required: ['perSecond', 'burst'],
          properties: { perSecond: { type: 'number' }, burst: { type: 'integer' } },
        },
        { type: 'null' },
      ],
    },
    push: { anyOf: [pushTargetView, { type: 'null' }] },
    pending: { type: 'integer' },
    dead: { type: 'integer' },
  },
};

export const topicListSchema = {
  operationId: 'listTopics',
  summary: 'Topics with messages or settings, with their settings and counts',
  tags: ['topics'],
  response: {
    200: {
      type: 'object',
      additionalProperties: false,
      required: ['topics'],
      properties: { topics: { type: 'array', items: topicInfo } },
    },
  },
};

export const topicGetSchema = {
  operationId: 'getTopic',
  summary: "A topic's settings (paused, rateLimit, push) and counts",
  tags: ['topics'],
  params: topicParams,
  response: { 200: topicInfo },
};

export const topicUpdateSchema = {
  operationId: 'configureTopic',
  summary:
    "Change a topic's settings: pause it, limit its delivery rate, push its messages to a URL (durable)",
  tags: ['topics'],
  params: topicParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: {
      paused: { type: 'boolean' },
      rateLimit: { anyOf: [rateLimit, { type: 'null' }] },
      push: { anyOf: [pushTarget, { type: 'null' }] },
    },
  },
  response: { 200: topicInfo },
};

export const topicPauseSchema = {
  operationId: 'pauseTopic',
  summary: 'Stop deliveries of a topic until resumed (schedules are still accepted)',
  tags: ['topics'],
  params: topicParams,
  response: { 200: topicInfo },
};

export const topicResumeSchema = {
  operationId: 'resumeTopic',
  summary: "Deliver a paused topic's messages again",
  tags: ['topics'],
  params: topicParams,
  response: { 200: topicInfo },
};

export const eventsSchema = {
  operationId: 'streamEvents',
  summary:
    'Message events as Server-Sent Events (scheduled, delivered, acked, failed, dead, cancelled)',
  tags: ['events'],
  querystring: {
    type: 'object',
    additionalProperties: false,
    properties: {
      topic,
      types: { type: 'string', minLength: 1, maxLength: 200 },
    },
  },
  response: {
    200: {
      description:
        'A text/event-stream: `event: <type>`, `id: <n>`, `data: <JSON event>`; `event: lost` ends a stream that fell behind',
      content: { 'text/event-stream': { schema: { type: 'string' } } },
    },
  },
};

// ---- recurring schedules (src/queue/recurring.ts) -----------------------------------------

const scheduleName = {
  type: 'string',
  minLength: 1,
  maxLength: 128,
  pattern: SCHEDULE_NAME_PATTERN.source,
};

const scheduleParams = {
  type: 'object',
  required: ['name'],
  properties: { name: scheduleName },
};

const scheduleFields = {
  topic,
  payload: {},
  cron: { type: 'string', minLength: 1, maxLength: 200 },
  timezone: { type: 'string', minLength: 1, maxLength: 100 },
  everyMs: { type: 'integer', minimum: MIN_EVERY_MS, maximum: MAX_EVERY_MS },
  startAt: { type: 'integer', minimum: 0 },
  endAt: { type: 'integer', minimum: 0 },
  catchUp: { enum: ['latest', 'all', 'none'] },
  overlap: { enum: ['allow', 'skip'] },
  maxAttempts: { type: 'integer', minimum: 1, maximum: 10_000 },
  backoff,
  paused: { type: 'boolean' },
};

const nullable = (type: string) => ({ type: [type, 'null'] });

const scheduleInfo = {
  type: 'object',
  additionalProperties: false,
  required: [
    'name',
    ...SPEC_FIELDS,
    'createdAt',
    'updatedAt',
    'lastAt',
    'nextAt',
    'created',
    'skipped',
  ],
  properties: {
    name: { type: 'string' },
    topic: { type: 'string' },
    payload: {},
    cron: nullable('string'),
    timezone: nullable('string'),
    everyMs: nullable('integer'),
    startAt: nullable('integer'),
    endAt: nullable('integer'),
    catchUp: { enum: ['latest', 'all', 'none'] },
    overlap: { enum: ['allow', 'skip'] },
    maxAttempts: { type: 'integer' },
    backoff: { anyOf: [backoff, { type: 'null' }] },
    paused: { type: 'boolean' },
    createdAt: { type: 'integer' },
    updatedAt: { type: 'integer' },
    lastAt: nullable('integer'),
    nextAt: nullable('integer'),
    created: { type: 'integer' },
    skipped: { type: 'integer' },
  },
};

export const scheduleListSchema = {
  operationId: 'listSchedules',
  summary: 'Recurring schedules, by name',
  tags: ['schedules'],
  response: {
    200: {
      type: 'object',
      additionalProperties: false,
      required: ['schedules'],
      properties: { schedules: { type: 'array', items: scheduleInfo } },
    },
  },
};

export const scheduleGetSchema = {
  operationId: 'getSchedule',
  summary: 'A recurring schedule, with its next and last occurrence',
  tags: ['schedules'],
  params: scheduleParams,
  response: { 200: scheduleInfo, 404: errorBody },
};

export const schedulePutSchema = {
  operationId: 'putSchedule',
  summary: 'Create or replace a recurring schedule (a cron expression in a time zone, or everyMs)',
  tags: ['schedules'],
  params: scheduleParams,
  body: {
    type: 'object',
    additionalProperties: false,
    required: ['topic'],
    properties: scheduleFields,
  },
  // 409: on a queue on Valkey/Redis, a change that kept meeting others (docs/cluster.md).
  response: { 200: scheduleInfo, 409: errorBody },
};

export const schedulePatchSchema = {
  operationId: 'updateSchedule',
  summary: 'Change some fields of a recurring schedule (paused, cron, everyMs, payload, ...)',
  tags: ['schedules'],
  params: scheduleParams,
  body: { type: 'object', additionalProperties: false, properties: scheduleFields },
  response: { 200: scheduleInfo, 404: errorBody, 409: errorBody },
};

export const scheduleDeleteSchema = {
  operationId: 'deleteSchedule',
  summary: 'Delete a recurring schedule (and its next occurrence, if created and not yet due)',
  tags: ['schedules'],
  params: scheduleParams,
  response: {
    200: {
      type: 'object',
      additionalProperties: false,
      required: ['deleted'],
      properties: { deleted: { type: 'boolean' } },
    },
    404: errorBody,
    409: errorBody,
  },
};
