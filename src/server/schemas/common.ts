/**
 * Shapes the route groups' schemas share, and the error answer. Input is checked strictly: no
 * coercion, no unknown properties (a typo such as `delay` must not mean "now"), bounds on every
 * string, number and array. Fastify serialises answers with the response schemas (dropping what
 * they do not list), and /openapi.json is built from them.
 */

import type { RouteOptions } from 'fastify';

import { ID_PATTERN, MAX_DELAY_MS, TOPIC_PATTERN } from '../../queue/message.js';
import { SCHEDULE_NAME_PATTERN } from '../../queue/recurring-spec.js';

/** A name in a path: a topic, a schedule. */
function pathName<Pattern extends string>(pattern: Pattern) {
  return { type: 'string', minLength: 1, maxLength: 128, pattern } as const;
}

export const topic = pathName(TOPIC_PATTERN.source);
const scheduleName = pathName(SCHEDULE_NAME_PATTERN.source);
export const id = {
  type: 'string',
  minLength: 1,
  maxLength: 200,
  pattern: ID_PATTERN.source,
} as const;

/** Any JSON value. */
export const payload = {} as const;

/** Deliveries of a message at most; the queue checks the same range (queue/message.ts). */
export const maxAttempts = { type: 'integer', minimum: 1, maximum: 10_000 } as const;

/** A page size as query text: 1 to 1000 (LIST_MAX_LIMIT, MAX_TOPIC_PAGE). */
export const PAGE_SIZE_PATTERN = '^(?:[1-9][0-9]{0,2}|1000)$';
/** A count as query text: 0 to 1000. */
export const COUNT_PATTERN = '^(?:0|[1-9][0-9]{0,2}|1000)$';

export function nullable<Type extends string>(type: Type) {
  return { type: [type, 'null'] } as const;
}

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
] as const;

/** A route's schema, listed in /openapi.json as `operationId` in the group `tag`. */
export function routeSchema<const Rest extends object>(
  tag: (typeof API_TAGS)[number]['name'],
  operationId: string,
  rest: Rest,
) {
  return { operationId, tags: [tag], ...rest };
}

export const errorDetail = {
  type: 'object',
  required: ['code', 'message', 'outcome'],
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
} as const;

/**
 * Every error answer: `{ error: { code, message, outcome } }`. Shared (plugins/conventions.ts
 * adds it before any route), so /openapi.json has it once, as components/schemas/Error.
 */
export const ERROR_SCHEMA = {
  $id: 'Error',
  type: 'object',
  required: ['error'],
  properties: { error: errorDetail },
} as const;

export const errorBody = { $ref: 'Error#' } as const;

/**
 * An onRoute hook that adds `errorBody` for `statuses` to the routes `applies` picks (one a route
 * declares keeps its own); the schema is replaced, not changed, as routes share schemas.
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

export function methodsOf(route: RouteOptions): string[] {
  return (Array.isArray(route.method) ? route.method : [route.method]).map((m) => m.toUpperCase());
}

/** Whether Fastify reads a body for the route's method(s), and so may refuse it. */
export function readsBody(route: RouteOptions): boolean {
  return methodsOf(route).some((method) => !['GET', 'HEAD', 'TRACE'].includes(method));
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

export const backoff = closed(['type', 'delayMs'], {
  type: { enum: ['fixed', 'exponential'] },
  delayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS },
  jitter: { type: 'number', minimum: 0, maximum: 1 },
  maxDelayMs: { type: 'number', minimum: 0, maximum: MAX_DELAY_MS },
});

function pathParams<Name extends string, Schema extends object>(name: Name, schema: Schema) {
  return {
    type: 'object',
    required: [name],
    properties: { [name]: schema } as { [key in Name]: Schema },
  } as const;
}

export const topicParams = pathParams('topic', topic);
export const idParams = pathParams('id', id);
export const scheduleParams = pathParams('name', scheduleName);

/** An input object that takes only `properties`, `required` among them (a typo is refused). */
export function closed<const P extends object, const R extends keyof P & string = never>(
  required: readonly R[],
  properties: P,
) {
  const schema = {
    type: 'object',
    additionalProperties: false,
    ...(required.length === 0 ? {} : { required }),
    properties,
  };
  // Typed with `required` always: a schema without it has none, as R is then never.
  return schema as {
    type: 'object';
    additionalProperties: false;
    required: readonly R[];
    properties: P;
  };
}

/** An object of `properties`, all required but the `optional` ones (so the two cannot drift). */
export function object<const P extends object, const O extends keyof P & string = never>(
  properties: P,
  ...optional: O[]
) {
  const required = Object.keys(properties).filter((key) => !optional.includes(key as O));
  return {
    type: 'object',
    required: required as Array<Exclude<keyof P & string, O>>,
    properties,
  } as const;
}

/** object(), answered with nothing else in it (Fastify's serialiser drops anything else). */
export function exact<const P extends object, const O extends keyof P & string = never>(
  properties: P,
  ...optional: O[]
) {
  return { additionalProperties: false, ...object(properties, ...optional) } as const;
}

export function text(mediaType: string, description: string) {
  return { description, content: { [mediaType]: { schema: { type: 'string' } } } } as const;
}

/** An answer that is a list, `{ <key>: [items] }`; when `closed`, with nothing else in it. */
export function listOf<const Key extends string, const Items extends object>(
  key: Key,
  items: Items,
  closed = false,
) {
  return {
    type: 'object',
    ...(closed ? { additionalProperties: false } : {}),
    required: [key],
    properties: { [key]: { type: 'array', items } } as {
      [k in Key]: { type: 'array'; items: Items };
    },
  } as const;
}

/** `{ <flag>: true }`, the answer of an operation that has nothing else to say. */
export function done<const Flag extends string, const Extra extends object = object>(
  flag: Flag,
  extra: Extra = {} as Extra,
) {
  return {
    type: 'object',
    required: [flag, ...(Object.keys(extra) as Array<keyof Extra & string>)],
    properties: {
      [flag]: { type: 'boolean', const: true },
      ...extra,
    } as { [key in Flag]: { type: 'boolean'; const: true } } & Extra,
  } as const;
}
