/**
 * Operator routes: /v1/stats (behind the token, like all of /v1), and the unauthenticated
 * /healthz, /metrics, / and /assets/* (the dashboard's page; its data comes from /v1).
 */

import type { FastifyInstance } from 'fastify';
import type { HealthResponse } from '../../client/protocol.js';
import type { ServerContext } from '../context.js';
import { notFound } from '../errors.js';
import { dashboardPage, loadDashboardAssets } from '../dashboard.js';

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
  const assets = loadDashboardAssets();
  const placeholder = dashboardPage(context.version, tokenRequired);

  app.get('/healthz', async (): Promise<HealthResponse> => ({ status: 'ok' }));

  app.get('/metrics', async (_request, reply) => {
    const text = await context.metrics.render(await context.queue.stats());
    void reply.type(context.metrics.contentType);
    return text;
  });

  app.get('/', async (_request, reply) => {
    const index = assets?.get('/index.html');
    void reply.type('text/html; charset=utf-8');
    if (index === undefined) return placeholder;
    void reply.header('cache-control', 'no-cache');
    return index.body;
  });

  // Vite names assets by content hash, so they can be cached for good.
  app.get<{ Params: { '*': string } }>('/assets/*', async (request, reply) => {
    const asset = assets?.get(`/assets/${request.params['*']}`);
    if (asset === undefined) throw notFound(`no dashboard asset ${request.url}`);
    void reply.type(asset.contentType);
    void reply.header('cache-control', 'public, max-age=31536000, immutable');
    return asset.body;
  });
}
