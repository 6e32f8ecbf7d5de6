/**
 * The wire types (src/protocol/wire.ts) against the route schemas (src/server/schemas/): for
 * each request and response body, the type a schema describes must be the wire type, exactly.
 * Checked by the compiler (wire-schemas.test.ts compiles this file; so does `npm run
 * typecheck`): a field added, removed, made optional or retyped on one side only is an error
 * here, naming the pair.
 *
 * FromSchema reads the subset of JSON Schema the routes use. A response schema that does not
 * say `additionalProperties` is read as closed, since Fastify's serialiser sends only the
 * properties it lists; `{ $ref: 'Error#' }` is the shared error body.
 */

import type {
  AckBody,
  AckResponse,
  BatchBody,
  BatchErrorResponse,
  BatchResponse,
  CancelResponse,
  DeadLettersResponse,
  ListResponse,
  NackBody,
  NackResponse,
  ReceiveBody,
  ReceiveResponse,
  RequeueBody,
  RequeueResponse,
  RescheduleBody,
  RescheduleResponse,
  ScheduleBody,
  ScheduleBodyRecurring,
  ScheduleDeleteResponse,
  ScheduleListResponse,
  ScheduleResult,
  StatsResponse,
  TopicListResponse,
  TopicUpdateBody,
  WireError,
  WireErrorDetail,
  WireMessageInfo,
  WireSchedule,
  WireTopic,
} from '../../src/protocol/wire.js';
import type { DashboardSnapshot } from '../../src/server/routes/dashboard.js';
import type { HealthBody } from '../../src/server/routes/operations.js';
import type { ERROR_SCHEMA } from '../../src/server/schemas/common.js';
import type * as messages from '../../src/server/schemas/messages.js';
import type * as schedules from '../../src/server/schemas/schedules.js';
import type * as status from '../../src/server/schemas/status.js';
import type * as topics from '../../src/server/schemas/topics.js';

type FromSchema<S> = S extends { $ref: 'Error#' }
  ? WireError
  : S extends { const: infer C }
    ? C
    : S extends { enum: readonly (infer E)[] }
      ? E
      : S extends { anyOf: readonly (infer A)[] }
        ? FromSchema<A>
        : S extends { type: readonly (infer T)[] }
          ? OfType<S, T>
          : S extends { type: infer T }
            ? OfType<S, T>
            : unknown;

type OfType<S, T> = T extends 'string'
  ? string
  : T extends 'number' | 'integer'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'null'
        ? null
        : T extends 'array'
          ? S extends { items: infer I }
            ? FromSchema<I>[]
            : unknown[]
          : T extends 'object'
            ? FromObject<S>
            : never;

type PropertiesOf<S> = S extends { properties: infer P } ? P : object;
type RequiredOf<S> = S extends { required: readonly (infer R)[] } ? R : never;
type MoreOf<S> = S extends { additionalProperties: infer A }
  ? A extends false
    ? object
    : A extends true
      ? Record<string, unknown>
      : Record<string, FromSchema<A>>
  : object;

type FromObject<S, P = PropertiesOf<S>> = {
  [K in keyof P as K extends RequiredOf<S> ? K : never]: FromSchema<P[K]>;
} & {
  [K in keyof P as K extends RequiredOf<S> ? never : K]?: FromSchema<P[K]>;
} & MoreOf<S>;

/** A type without readonly and intersections, so that equal shapes compare equal. */
type Plain<T> = T extends readonly (infer U)[]
  ? Plain<U>[]
  : T extends object
    ? { -readonly [K in keyof T]: Plain<T[K]> }
    : T;

type Same<A, B> =
  (<T>() => T extends Plain<A> ? 1 : 2) extends <T>() => T extends Plain<B> ? 1 : 2 ? true : false;

/** Compiles only when `Schema` describes exactly `Wire`: else `Wire` is refused here. */
type Check<
  Schema,
  Wire extends (Same<FromSchema<Schema>, Wire> extends true ? unknown : 'differs from its schema'),
> = Wire;

type RequiredKeysOf<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];

/**
 * For a schema left open (GET /v1/stats: a store of one's own may report figures of its own):
 * compiles only when `Schema` lists exactly the fields of `Wire`, required where `Wire`
 * requires them. The fields' own shapes are the type's.
 */
type CheckFields<
  Schema,
  Wire extends (Same<keyof PropertiesOf<Schema>, keyof Wire> extends true
    ? Same<RequiredOf<Schema>, RequiredKeysOf<Wire>> extends true
      ? unknown
      : 'requires other fields than its schema'
    : 'has other fields than its schema'),
> = Wire;

type Response<S, Status extends number> = S extends { response: infer R }
  ? Status extends keyof R
    ? R[Status]
    : never
  : never;
type Body<S> = S extends { body: infer B } ? B : never;

/**
 * The error codes are a closed union in the type and a pattern in the schema (the schema
 * describes every version's codes, the type this version's).
 */
type WireErrorAnyCode = { error: Omit<WireErrorDetail, 'code'> & { code: string } };

export type Checks = [
  // Requests.
  Check<Body<typeof messages.scheduleSchema>, ScheduleBody>,
  Check<Body<typeof messages.batchSchema>, BatchBody>,
  Check<Body<typeof messages.rescheduleSchema>, RescheduleBody>,
  Check<Body<typeof messages.requeueSchema>, RequeueBody>,
  Check<Body<typeof messages.receiveSchema>, ReceiveBody>,
  Check<Body<typeof messages.ackSchema>, AckBody>,
  Check<Body<typeof messages.nackSchema>, NackBody>,
  Check<Body<typeof topics.topicUpdateSchema>, TopicUpdateBody>,
  Check<Body<typeof schedules.schedulePutSchema>, ScheduleBodyRecurring>,
  Check<Body<typeof schedules.schedulePatchSchema>, Partial<ScheduleBodyRecurring>>,
  // Responses.
  Check<typeof ERROR_SCHEMA, WireErrorAnyCode>,
  Check<Response<typeof messages.scheduleSchema, 201>, ScheduleResult>,
  Check<Response<typeof messages.batchSchema, 201>, BatchResponse>,
  Check<
    Response<typeof messages.batchSchema, 409>,
    Omit<BatchErrorResponse, 'error'> & WireErrorAnyCode
  >,
  Check<Response<typeof messages.getSchema, 200>, WireMessageInfo>,
  Check<Response<typeof messages.cancelSchema, 200>, CancelResponse>,
  Check<Response<typeof messages.rescheduleSchema, 200>, RescheduleResponse>,
  Check<Response<typeof messages.requeueSchema, 200>, RequeueResponse>,
  Check<Response<typeof messages.receiveSchema, 200>, ReceiveResponse>,
  Check<Response<typeof messages.ackSchema, 200>, AckResponse>,
  Check<Response<typeof messages.nackSchema, 200>, NackResponse>,
  Check<Response<typeof messages.deadLettersSchema, 200>, DeadLettersResponse>,
  Check<Response<typeof messages.listSchema, 200>, ListResponse>,
  Check<Response<typeof topics.topicListSchema, 200>, TopicListResponse>,
  Check<Response<typeof topics.topicGetSchema, 200>, WireTopic>,
  Check<Response<typeof topics.topicUpdateSchema, 200>, WireTopic>,
  Check<Response<typeof topics.topicPauseSchema, 200>, WireTopic>,
  Check<Response<typeof topics.topicResumeSchema, 200>, WireTopic>,
  Check<Response<typeof schedules.scheduleListSchema, 200>, ScheduleListResponse>,
  Check<Response<typeof schedules.scheduleGetSchema, 200>, WireSchedule>,
  Check<Response<typeof schedules.schedulePutSchema, 200>, WireSchedule>,
  Check<Response<typeof schedules.schedulePatchSchema, 200>, WireSchedule>,
  Check<Response<typeof schedules.scheduleDeleteSchema, 200>, ScheduleDeleteResponse>,
  Check<
    Response<typeof status.healthSchema, 200> | Response<typeof status.healthSchema, 503>,
    HealthBody | WireError
  >,
  Check<Response<typeof status.dashboardSchema, 200>, DashboardSnapshot>,
  CheckFields<Response<typeof status.statsSchema, 200>, StatsResponse>,
];
