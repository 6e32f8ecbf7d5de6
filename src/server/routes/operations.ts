/**
 * Operator routes: /v1/stats (behind the token, like all of /v1), and the unauthenticated
 * /healthz, /metrics and / (dashboard).
 */

import type { FastifyInstance } from 'fastify';
import type { HealthResponse } from '../../client/protocol.js';
import type { ServerContext } from '../context.js';
import { dashboardPage } from '../dashboard.js';

export function statsRoute(app: FastifyInstance, context: ServerContext): void {
  app.get('/stats', async () => ({
    ...(await context.queue.stats()),
    recovery: context.queue.recovery ?? null,
    server: {
      version: context.version,
      uptimeMs: Math.round(performance.now() - context.startedAt),
      maxWaitMs: context.maxWaitMs,
    },
  }));
}

export function operationRoutes(
  app: FastifyInstance,
  context: ServerContext,
  tokenRequired: boolean,
): void {
  const page = dashboardPage(context.version, tokenRequired);

  app.get('/healthz', async (): Promise<HealthResponse> => ({ status: 'ok' }));

  app.get('/metrics', async (_request, reply) => {
    const text = await context.metrics.render(await context.queue.stats());
    void reply.type(context.metrics.contentType);
    return text;
  });

  app.get('/', async (_request, reply) => {
    void reply.type('text/html; charset=utf-8');
    return page;
  });
}
