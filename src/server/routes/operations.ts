/** Operator routes: /v1/stats, and /healthz, /metrics and the dashboard page without a token. */

import type { FastifyPluginAsync } from 'fastify';
import type { StatsResponse } from '../../protocol/wire.js';
import type { RouteGroupOptions, ServerContext } from '../context.js';
import { notFound } from '../errors.js';
import { RETRY_AFTER_SECONDS } from '../settings.js';
import { dashboardPage, loadDashboardAssets } from '../dashboard.js';
import { favicon } from '../favicon.js';
import {
  dashboardPageSchema,
  healthSchema,
  metricsSchema,
  statsSchema,
} from '../schemas/status.js';

/**
 * GET /healthz: `ok` only while the queue takes writes; not while opening, not if opening
 * failed, not once the store stopped after a failed log write (only a restart helps then).
 */
export type HealthBody =
  | { status: 'ok' }
  | { status: 'recovering' | 'failed' | 'stopped' | 'unavailable'; reason: string };

async function health(context: ServerContext): Promise<HealthBody> {
  if (context.state === 'opening') {
    return { status: 'recovering', reason: context.opening };
  }
  if (context.state === 'failed') {
    const error = context.openError as { message?: unknown } | undefined;
    return {
      status: 'failed',
      reason: `the queue could not be opened: ${String(error?.message ?? error)}`,
    };
  }
  const problem = await context.queue.problem?.();
  if (problem !== undefined) return { status: 'unavailable', reason: problem };
  if (context.queue.stopped()) {
    return {
      status: 'stopped',
      reason:
        'the store takes no more writes since a log write failed (disk full, read-only or ' +
        'failing; the server log has the error). Everything acknowledged before it is on disk: ' +
        'restart the server to recover and continue',
    };
  }
  return { status: 'ok' };
}

export const statsRoute: FastifyPluginAsync<RouteGroupOptions> = async (app, { context }) => {
  app.get<{ Querystring: { topics?: string } }>(
    '/stats',
    { schema: statsSchema },
    async (request): Promise<StatsResponse> => ({
      ...(await context.queue.stats(
        request.query.topics === undefined ? {} : { topics: Number(request.query.topics) },
      )),
      recovery: context.queue.recovery ?? null,
      server: {
        version: context.version,
        uptimeMs: Math.round(performance.now() - context.startedAt),
        maxWaitMs: context.maxWaitMs,
      },
    }),
  );
};

export const operationRoutes: FastifyPluginAsync<
  RouteGroupOptions & { tokenRequired: boolean }
> = async (app, { context, tokenRequired }) => {
  const assets = loadDashboardAssets();
  const placeholder = dashboardPage(context.version, tokenRequired);
  const icon = favicon();

  app.get('/healthz', { schema: healthSchema }, async (_request, reply): Promise<HealthBody> => {
    const body = await health(context);
    if (body.status !== 'ok') void reply.code(503);
    if (body.status === 'recovering') void reply.header('retry-after', RETRY_AFTER_SECONDS);
    return body;
  });

  app.get('/metrics', { schema: metricsSchema }, async (_request, reply) => {
    const { metrics } = context;
    const text = await metrics.render(await context.queue.stats({ topics: metrics.topics }));
    void reply.type(context.metrics.registry.contentType);
    return text;
  });

  app.get('/', { schema: dashboardPageSchema }, async (_request, reply) => {
    const index = assets?.get('/index.html');
    void reply.type('text/html; charset=utf-8');
    if (index === undefined) return placeholder;
    void reply.header('cache-control', 'no-cache');
    return index.body;
  });

  // Browsers ask for it on their own; left out of /openapi.json like the assets.
  app.get('/favicon.ico', { config: { openapi: false } }, async (_request, reply) => {
    void reply.type('image/x-icon');
    void reply.header('cache-control', 'public, max-age=86400');
    return icon;
  });

  // Named by content hash: cached for good. Not in /openapi.json: not API, and a wildcard.
  app.get<{ Params: { '*': string } }>(
    '/assets/*',
    { config: { openapi: false } },
    async (request, reply) => {
      const asset = assets?.get(`/assets/${request.params['*']}`);
      if (asset === undefined) throw notFound(`no dashboard asset ${request.url}`);
      void reply.type(asset.contentType);
      void reply.header('cache-control', 'public, max-age=31536000, immutable');
      return asset.body;
    },
  );
};
