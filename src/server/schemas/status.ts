/** JSON Schemas of the operations and dashboard routes, and of /openapi.json. */

import { COUNTER_NAMES } from '../../protocol/model.js';
import {
  closed,
  COUNT_PATTERN,
  errorBody,
  idParams,
  nullable,
  object,
  routeSchema,
  text,
} from './common.js';

const nullableNumber = nullable('number');
/** An object whose content is open: the properties listed, and whatever else the queue adds. */
const open = { type: 'object', additionalProperties: true } as const;
const counter = { type: 'number' } as const;
/** Fire lateness, in ms: null before any message fired. */
const lateness = { p50: nullableNumber, p99: nullableNumber, max: nullableNumber } as const;
const counters = Object.fromEntries(COUNTER_NAMES.map((name) => [name, counter])) as Record<
  (typeof COUNTER_NAMES)[number],
  typeof counter
>;

/** stats() and the server's figures, open at every level so that a store's own figures are sent. */
export const statsSchema = routeSchema('operations', 'stats', {
  summary: 'Counters, messages by topic, lateness, store and server figures',
  querystring: closed([], {
    // 0 to 1000 (MAX_TOPIC_PAGE), as text.
    topics: {
      type: 'string',
      pattern: COUNT_PATTERN,
      description:
        'How many topics `topics` names: those with the most live messages (default 100)',
    },
  }),
  response: {
    200: {
      ...open,
      required: [
        ...COUNTER_NAMES,
        'latenessMs',
        'deliveryLatenessMs',
        'inMemory',
        'topics',
        'topicCount',
        'otherTopics',
        'timers',
        'push',
        'recovery',
        'server',
      ],
      properties: {
        ...counters,
        latenessMs: {
          ...open,
          description:
            'Fire lateness (due to ready): the last 4096 messages; count, sum since start',
          properties: lateness,
        },
        deliveryLatenessMs: {
          ...open,
          description: 'First-delivery lateness: cumulative [upper bound ms, count] buckets',
        },
        inMemory: counter,
        loadedUntil: counter,
        topics: {
          type: 'object',
          description:
            'Live messages by state of the topics with the most (`topics` of them; default 100)',
          additionalProperties: open,
        },
        topicCount: { ...counter, description: 'Topics with live messages' },
        otherTopics: {
          ...open,
          description: 'Live messages by state of the topics not named in `topics`, summed',
        },
        timers: { ...open, description: "The in-memory timer wheel's figures" },
        push: { ...open, description: 'Pushes by topic, of this process' },
        payloadMemory: {
          ...open,
          description: 'Payload bytes held in memory, and the budget (one machine)',
        },
        loadFailing: { ...counter, description: '1 while due messages cannot be loaded' },
        store: { ...open, description: 'Figures of the store (one machine)' },
        totals: {
          ...open,
          description: 'Messages by state (a queue on Valkey/Redis or PostgreSQL)',
        },
        cluster: {
          ...open,
          description: 'The cluster as this node sees it (Valkey/Redis or PostgreSQL)',
        },
        recovery: {
          type: ['object', 'null'],
          additionalProperties: true,
          description: 'What the last start recovered from the data directory',
        },
        server: object({
          version: { type: 'string' },
          uptimeMs: { type: 'number' },
          maxWaitMs: { type: 'number' },
        }),
      },
    },
  },
});

const healthNotOk = object({
  status: { type: 'string', enum: ['recovering', 'failed', 'stopped', 'unavailable'] },
  reason: { type: 'string' },
});

export const healthSchema = routeSchema('operations', 'health', {
  summary: 'Whether the server takes writes',
  response: {
    200: {
      description: 'The queue takes writes',
      ...object({ status: { type: 'string', const: 'ok' } }),
    },
    503: {
      description:
        'Recovering, stopped, failed to open, Valkey/Redis or PostgreSQL not answering; or closing',
      anyOf: [healthNotOk, errorBody],
    },
  },
});

export const metricsSchema = routeSchema('operations', 'metrics', {
  summary: 'The figures of the queue and the server, for Prometheus',
  response: {
    200: text('text/plain', 'Prometheus text format (version=0.0.4)'),
  },
});

export const openApiSchema = routeSchema('operations', 'openApi', {
  summary: 'This document: OpenAPI 3.1, generated from the schemas of the routes',
  response: {
    200: {
      description: 'An OpenAPI 3.1 document',
      ...open,
      required: ['openapi', 'info', 'paths'],
      properties: { openapi: { type: 'string' }, info: open, paths: open },
    },
  },
});

const topicCounts = object({
  scheduled: counter,
  ready: counter,
  inflight: counter,
  dead: counter,
});

/** DashboardSnapshot (dashboard routes): everything the page draws, in one answer. */
export const dashboardSchema = routeSchema('dashboard', 'dashboard', {
  summary: 'One snapshot of what the dashboard draws (built at most once a second)',
  response: {
    200: object({
      now: { type: 'number' },
      version: { type: 'string' },
      uptimeMs: { type: 'number' },
      counters: { type: 'object', additionalProperties: counter },
      topics: {
        type: 'object',
        description: 'The topics with the most live messages, at most 100',
        additionalProperties: topicCounts,
      },
      topicCount: counter,
      otherTopics: topicCounts,
      totals: object({
        inMemory: counter,
        live: nullableNumber,
        dead: nullableNumber,
        loadedUntil: { type: 'number' },
      }),
      latenessMs: object(lateness),
      upcoming: {
        type: 'array',
        items: object({
          label: { type: 'string' },
          fromMs: { type: 'number' },
          untilMs: nullableNumber,
          count: counter,
        }),
      },
      wheel: object({
        levels: {
          type: 'array',
          items: object({
            cursor: { type: 'number' },
            slots: { type: 'array', items: counter },
            slotsPerCell: { type: 'number' },
          }),
        },
        truncated: { type: 'boolean' },
      }),
      cluster: {
        description:
          'Null on one machine; on Valkey/Redis or PostgreSQL, the nodes and their partitions',
        ...object({
          node: { type: 'string' },
          queue: { type: 'string' },
          partitions: { type: 'number' },
          durability: { type: 'string' },
          nodes: {
            type: 'array',
            items: object({
              node: { type: 'string' },
              partitions: { type: 'array', items: { type: 'number' } },
              alive: { type: 'boolean' },
            }),
          },
          leaseChanges: counter,
        }),
        type: ['object', 'null'],
      },
    }),
  },
});

export const previewSchema = routeSchema('dashboard', 'payloadPreview', {
  summary: 'The start of the payload of a live or dead message, for people',
  params: idParams,
  response: {
    200: object({ preview: { type: 'string' }, truncated: { type: 'boolean' } }),
    404: errorBody,
  },
});

export const dashboardPageSchema = routeSchema('dashboard', 'dashboardPage', {
  summary: 'The web dashboard',
  response: {
    200: text(
      'text/html',
      'The page (a placeholder in a checkout that has not built the dashboard)',
    ),
  },
});
