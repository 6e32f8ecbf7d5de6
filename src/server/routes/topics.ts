/** Topic routes: list, read and change a topic's settings; a change answers once durable. */

import type { FastifyPluginAsync } from 'fastify';
import type { TopicListResponse, TopicUpdateBody, WireTopic } from '../../protocol/wire.js';
import type { RouteGroupOptions } from '../context.js';
import {
  topicGetSchema,
  topicListSchema,
  topicPauseSchema,
  topicResumeSchema,
  topicUpdateSchema,
} from '../schemas/topics.js';

type TopicRequest = { Params: { topic: string } };

export const topicRoutes: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  app.get<{ Querystring: { limit?: string; cursor?: string } }>(
    '/topics',
    { schema: topicListSchema },
    (request): Promise<TopicListResponse> => {
      const { limit, cursor } = request.query;
      return context.queue.topicList({
        cursor,
        ...(limit === undefined ? {} : { limit: Number(limit) }),
      });
    },
  );

  app.get<TopicRequest>(
    '/topics/:topic',
    { schema: topicGetSchema },
    (request): Promise<WireTopic> => context.queue.topicInfo(request.params.topic),
  );

  app.patch<TopicRequest & { Body: TopicUpdateBody }>(
    '/topics/:topic',
    { schema: topicUpdateSchema },
    (request): Promise<WireTopic> =>
      context.queue.configureTopic(request.params.topic, request.body),
  );

  app.post<TopicRequest>(
    '/topics/:topic/pause',
    { schema: topicPauseSchema },
    (request): Promise<WireTopic> => context.queue.pause(request.params.topic),
  );

  app.post<TopicRequest>(
    '/topics/:topic/resume',
    { schema: topicResumeSchema },
    (request): Promise<WireTopic> => context.queue.resume(request.params.topic),
  );
};
