/**
 * GET /v1/events (docs/http-api.md, Events): the queue's message events as Server-Sent Events.
 * A reader 10,000 events behind gets one `event: lost` and the stream ends; closing the server
 * ends every stream, so a graceful shutdown does not wait for them. The streams write in turns
 * of the event loop shared with each other (turnDue).
 */

import type { FastifyPluginAsync } from 'fastify';
import { TickwheelError } from '../../errors.js';
import { EVENT_TYPES, type QueueEventType } from '../../queue/events.js';
import type { RouteGroupOptions } from '../context.js';
import { invalidRequest } from '../errors.js';
import { eventsSchema } from '../schemas/topics.js';
import { drained, KEEP_ALIVE_MS, OpenStreams, turnDue } from './open-streams.js';

const BUFFER = 10_000;

export const eventRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  const streams = new OpenStreams(app, context.metrics);

  app.get<{ Querystring: { topic?: string; types?: string } }>(
    '/events',
    { schema: eventsSchema },
    async (request, reply) => {
      const types = parseTypes(request.query.types);
      const controller = new AbortController();
      const events = context.queue.events.watch({
        ...(request.query.topic === undefined ? {} : { topic: request.query.topic }),
        ...(types === undefined ? {} : { types }),
        signal: controller.signal,
        buffer: BUFFER,
      });
      const end = () => controller.abort();
      const raw = streams.open(reply, 'text/event-stream', end);
      raw.write(': tickwheel events\n\n');
      const keepAlive = setInterval(() => raw.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
      let n = 0;
      try {
        for await (const event of events) {
          // Back-pressure: while the socket is full nothing more is written; the events wait in
          // the iterator's buffer, and a reader that stays behind ends with `lost`.
          if (!raw.write(`event: ${event.type}\nid: ${++n}\ndata: ${JSON.stringify(event)}\n\n`)) {
            await drained(raw, controller.signal);
          }
          // Many readers that keep up would otherwise have a burst written in one go.
          const turn = turnDue();
          if (turn !== undefined) await turn;
        }
      } catch (err) {
        const code = err instanceof TickwheelError ? err.code : 'ERR_TICKWHEEL_EVENTS_LOST';
        const body = { error: { code, message: (err as Error).message } };
        raw.write(`event: lost\ndata: ${JSON.stringify(body)}\n\n`);
      } finally {
        clearInterval(keepAlive);
        streams.close(raw, end);
      }
    },
  );
};

function parseTypes(text: string | undefined): QueueEventType[] | undefined {
  if (text === undefined) return undefined;
  const types = text.split(',').map((type) => type.trim());
  for (const type of types) {
    if (!(EVENT_TYPES as readonly string[]).includes(type)) {
      throw invalidRequest(
        `querystring/types: unknown event type ${JSON.stringify(type)}; the types are ${EVENT_TYPES.join(', ')}`,
      );
    }
  }
  return types as QueueEventType[];
}
