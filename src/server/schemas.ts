/**
 * JSON Schemas of every route. Input is checked strictly: no type coercion, no unknown
 * properties (a typo such as `delay` for `delayMs` must not silently mean "deliver now"), and
 * bounds on every string, number and array, so that nothing a caller sends can make the
 * server do unbounded work. The queue checks the same things again; these schemas exist to
 * answer early, with the path of the offending field, and to bound work before it starts.
 *
 * Response schemas on hot routes let Fastify serialise with a compiled function.
 */

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

const topic = { type: 'string', minLength: 1, maxLength: 128, pattern: TOPIC_PATTERN.source };
const id = { type: 'string', minLength: 1, maxLength: 200, pattern: ID_PATTERN.source };

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
    status: { type: 'string' },
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

export const scheduleSchema = {
  params: topicParams,
  body: message,
  response: { 201: scheduleResult },
};

export const batchSchema = {
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
  },
};

export const getSchema = {
  params: idParams,
  response: { 200: messageInfo },
};

export const cancelSchema = {
  params: idParams,
};

export const rescheduleSchema = {
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: {
      delayMs: messageProperties.delayMs,
      deliverAt: messageProperties.deliverAt,
    },
  },
};

export const receiveSchema = {
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
  params: idParams,
  body: {
    type: 'object',
    additionalProperties: false,
    properties: { delayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS } },
  },
};
