/**
 * Consumer routes: long-poll receive, the delivery stream (stream.ts), ack, nack, dead letters.
 * A long poll waits in slices of POLL_SLICE_MS to notice a client gone or a server closing;
 * messages taken for a client gone are nacked back (an attempt, as a visibility timeout is).
 */

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type {
  AckBody,
  AckResponse,
  DeadLettersResponse,
  NackBody,
  NackResponse,
  ReceiveBody,
  ReceiveResponse,
} from '../../protocol/wire.js';
import { DEFAULT_RECEIVE_BYTES } from '../../protocol/limits.js';
import type { RouteGroupOptions } from '../context.js';
import { ackSchema, deadLettersSchema, nackSchema, receiveSchema } from '../schemas/messages.js';
import { DeliveryStreams, streamRoute } from './stream.js';
import { handBack, toWire } from './wire.js';

const POLL_SLICE_MS = 500;

function clientGone(request: FastifyRequest): boolean {
  return request.raw.socket?.destroyed === true;
}

export const deliveryRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  const streams = new DeliveryStreams();
  app.post<{ Params: { topic: string }; Body: ReceiveBody }>(
    '/topics/:topic/receive',
    { schema: receiveSchema },
    async (request): Promise<ReceiveResponse> => {
      const { topic } = request.params;
      const { queue } = context;
      const { max, waitMs = 0, visibilityMs, maxBytes = DEFAULT_RECEIVE_BYTES } = request.body;
      // The queue takes an option that is undefined as not given.
      const options = { maxBytes, max, visibilityMs };
      const deadline = performance.now() + Math.min(waitMs, context.maxWaitMs);
      let messages = await queue.receive(topic, options);
      while (messages.length === 0 && !context.closing && !clientGone(request)) {
        const left = deadline - performance.now();
        if (left <= 0) break;
        messages = await queue.receive(topic, {
          ...options,
          waitMs: Math.min(left, POLL_SLICE_MS),
        });
      }
      if (messages.length > 0 && clientGone(request)) {
        handBack(queue, messages);
        return { messages: [] };
      }
      return { messages: messages.map(toWire) };
    },
  );

  streamRoute(app, context, streams);

  app.post<{ Body: AckBody }>(
    '/ack',
    { schema: ackSchema },
    async (request): Promise<AckResponse> => {
      const { receipts, durable } = request.body;
      const results = await context.queue.ackMany(receipts, { durable });
      streams.release(receipts);
      return { acked: results.filter(Boolean).length, results };
    },
  );

  app.post<{ Body: NackBody }>(
    '/nack',
    { schema: nackSchema },
    async (request): Promise<NackResponse> => {
      const { receipts, ...options } = request.body;
      const results = await Promise.all(receipts.map((r) => context.queue.nack(r, options)));
      streams.release(receipts);
      return { nacked: results.filter(Boolean).length, results };
    },
  );

  app.get<{ Params: { topic: string }; Querystring: { limit?: string } }>(
    '/topics/:topic/dead',
    { schema: deadLettersSchema },
    async (request): Promise<DeadLettersResponse> => {
      const limit = request.query.limit === undefined ? 100 : Number(request.query.limit);
      return { messages: await context.queue.deadLetters(request.params.topic, limit) };
    },
  );
};
