/** Producer routes: schedule (one or a batch), get, list, cancel, reschedule, requeue. */

import type { FastifyPluginAsync } from 'fastify';
import type {
  BatchBody,
  BatchErrorResponse,
  BatchResponse,
  CancelResponse,
  ListResponse,
  RequeueBody,
  RequeueResponse,
  RescheduleBody,
  RescheduleResponse,
  ScheduleBody,
  ScheduleResult,
  WireError,
  WireErrorCode,
  WireMessageInfo,
} from '../../protocol/wire.js';
import { TickwheelRangeError, TickwheelTypeError } from '../../errors.js';
import type { ListOptions } from '../../protocol/model.js';
import type { ScheduleRequest } from '../../queue/message.js';
import { traceContextOfHeaders } from '../../protocol/trace-context.js';
import type { RouteGroupOptions } from '../context.js';
import { conflict, invalidRequest, notFound, toErrorResponse } from '../errors.js';
import {
  batchSchema,
  cancelSchema,
  getSchema,
  listSchema,
  requeueSchema,
  rescheduleSchema,
  scheduleSchema,
} from '../schemas/messages.js';

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** A checked body as a schedule request, reused where it can be (so a batch copies nothing). */
function toScheduleRequest(
  topic: string,
  body: ScheduleBody & { topic?: string },
  where: string,
): ScheduleRequest {
  if (body.delayMs !== undefined && body.deliverAt !== undefined) {
    throw invalidRequest(`${where}: give either delayMs or deliverAt, not both`);
  }
  const request = body as ScheduleRequest & ScheduleBody;
  request.topic = topic;
  // `delete` makes an object slow to read, so only the rare body with an encoding pays for it.
  if (body.payloadEncoding === undefined) return request;
  if (body.payloadEncoding === 'base64') {
    if (typeof body.payload !== 'string' || !BASE64.test(body.payload)) {
      throw invalidRequest(
        `${where}/payload must be a base64 string when payloadEncoding is base64`,
      );
    }
    request.payload = Buffer.from(body.payload, 'base64');
  }
  delete request.payloadEncoding;
  return request;
}

/** The query of GET /topics/:topic/messages, as text (listSchema checks its form). */
type ListQuerystring = Partial<Record<NumberKey | 'cursor', string>>;
type NumberKey = 'from' | 'until' | 'limit';

/** Why a message is not pending, from one read of it (a second could tell another story). */
function whyMissing(id: string, info: WireMessageInfo | undefined): string {
  return info === undefined
    ? `no message with id ${id}`
    : `message ${id} is ${info.status}, not pending`;
}

export const messageRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  app.post<{ Params: { topic: string }; Body: ScheduleBody }>(
    '/topics/:topic/messages',
    { schema: scheduleSchema },
    async (request, reply): Promise<ScheduleResult> => {
      const message = toScheduleRequest(request.params.topic, request.body, 'body');
      const trace = traceContextOfHeaders(request.headers);
      if (trace !== undefined) message.trace ??= trace;
      void reply.code(201);
      return context.queue.schedule(message);
    },
  );

  app.get<{ Params: { topic: string }; Querystring: ListQuerystring }>(
    '/topics/:topic/messages',
    { schema: listSchema },
    (request): Promise<ListResponse> => {
      const { cursor, ...numbers } = request.query;
      const options: ListOptions = { topic: request.params.topic, cursor };
      for (const [key, text] of Object.entries(numbers)) options[key as NumberKey] = Number(text);
      return context.queue.list(options);
    },
  );

  app.post<{ Body: BatchBody }>(
    '/messages::batch',
    { schema: batchSchema },
    async (request, reply): Promise<BatchResponse | BatchErrorResponse> => {
      const items = request.body.messages;
      // What can be refused without the queue is, before anything is scheduled: all or nothing.
      const messages = items.map((item, i) => toScheduleRequest(item.topic, item, `messages/${i}`));
      const trace = traceContextOfHeaders(request.headers);
      if (trace !== undefined) for (const message of messages) message.trace ??= trace;
      const { queue } = context;
      try {
        // The usual case: one call, the records share group commits and one promise.
        const results = await queue.scheduleMany(messages);
        void reply.code(201);
        return { results };
      } catch (err) {
        // scheduleMany checks every message before writing any: after a refusal the path below
        // says which are refused and schedules the rest. Anything else is the store failing.
        if (!(err instanceof TickwheelTypeError || err instanceof TickwheelRangeError)) throw err;
      }
      const settled = await Promise.allSettled(messages.map((message) => queue.schedule(message)));
      let failure: { statusCode: number; message: string; code: WireErrorCode } | undefined;
      let failed = 0;
      // Messages whose failure may have left them scheduled after all.
      const unknown: string[] = [];
      let retry = true;
      const results: Array<ScheduleResult | WireError> = [];
      for (const outcome of settled) {
        if (outcome.status === 'fulfilled') {
          results.push(outcome.value);
          continue;
        }
        const { statusCode, body } = toErrorResponse(outcome.reason);
        if (body.error.id !== undefined) unknown.push(body.error.id);
        if (body.error.id !== undefined && body.error.retry === undefined) retry = false;
        failed++;
        failure ??= { statusCode, ...body.error };
        if (statusCode >= 500) request.log.error({ err: outcome.reason }, 'batch item failed');
        results.push(body);
      }
      if (failure === undefined) {
        void reply.code(201);
        return { results: results as ScheduleResult[] };
      }
      void reply.code(failure.statusCode);
      return {
        error: {
          code: failure.code,
          message: `${failed} of ${items.length} messages were not scheduled (the first: ${failure.message}); results tells which, the others are scheduled`,
          // Of the messages that failed: those whose outcome is unknown, if any.
          ...(unknown.length === 0
            ? { outcome: 'none' as const }
            : {
                outcome: 'unknown' as const,
                ids: unknown,
                ...(retry ? { retry: 'same-id' as const } : {}),
              }),
        },
        results,
      };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/messages/:id',
    { schema: getSchema },
    async (request): Promise<WireMessageInfo> => {
      const info = await context.queue.get(request.params.id);
      if (info === undefined) throw notFound(`no message with id ${request.params.id}`);
      return info;
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/messages/:id',
    { schema: cancelSchema },
    async (request): Promise<CancelResponse> => {
      const { id } = request.params;
      if (await context.queue.cancel(id)) return { cancelled: true };
      throw notFound(whyMissing(id, await context.queue.get(id)));
    },
  );

  app.patch<{ Params: { id: string }; Body: RescheduleBody }>(
    '/messages/:id',
    { schema: rescheduleSchema },
    async (request): Promise<RescheduleResponse> => {
      const { id } = request.params;
      const { queue } = context;
      // What the queue stored, not a time worked out here: it rounds, clamps and has its own
      // clock, and by the time a get() answered the message could be gone.
      const deliverAt = await queue.rescheduleTo(id, request.body);
      if (deliverAt === undefined) {
        const info = await queue.get(id);
        if (info?.status === 'inflight') {
          throw conflict(`message ${id} is in flight; ack or nack it first`);
        }
        if (info?.status === 'dead') {
          throw conflict(`message ${id} is dead; requeue it instead`);
        }
        throw notFound(whyMissing(id, info));
      }
      return { rescheduled: true, deliverAt };
    },
  );

  app.post<{ Params: { id: string }; Body: RequeueBody }>(
    '/messages/:id/requeue',
    { schema: requeueSchema },
    async (request): Promise<RequeueResponse> => {
      const { id } = request.params;
      const { queue } = context;
      if (!(await queue.requeue(id, request.body))) {
        const info = await queue.get(id);
        if (info !== undefined && info.status !== 'dead') {
          throw conflict(`message ${id} is ${info.status}; only dead letters can be requeued`);
        }
        throw notFound(`no dead message with id ${id}`);
      }
      return { requeued: true };
    },
  );
};
