/**
 * createServer(): a Fastify instance serving one queue over HTTP (docs/http-api.md), made of
 * plugins, one concern each. With `openInBackground` it resolves once the data directory is
 * locked, before recovery: the server answers 503 until the queue is open (`server.opened`).
 */

import Fastify, { LogController, type FastifyInstance, type FastifyPluginAsync } from 'fastify';
import type { Queue } from '../queue/api.js';
import type { RouteGroupOptions, ServerContext } from './context.js';
import { handleClientError, handleFrameworkError } from './errors.js';
import { logFaults, loggerOptions, logRequests } from './logging.js';
import { ServerMetrics } from './metrics.js';
import { openApiRoute, recordRoutes } from './openapi.js';
import { checkServerOptions, type ServerOptions, type ServerSettings } from './options.js';
import { apiAccess, hostAccess } from './plugins/access.js';
import { apiConventions } from './plugins/conventions.js';
import { lifecycle, startOpening, watchOpening } from './plugins/lifecycle.js';
import { requestMetrics } from './plugins/metrics.js';
import { formatSchemaErrors } from './validation.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { deliveryRoutes } from './routes/deliveries.js';
import { messageRoutes } from './routes/messages.js';
import { operationRoutes, statsRoute } from './routes/operations.js';
import { topicRoutes } from './routes/topics.js';
import { eventRoutes } from './routes/events.js';
import { scheduleRoutes } from './routes/schedules.js';
import { VERSION } from './version.js';

/** The /v1 route groups, in the order /openapi.json lists them. */
const API_ROUTES: ReadonlyArray<FastifyPluginAsync<RouteGroupOptions>> = [
  messageRoutes,
  deliveryRoutes,
  statsRoute,
  dashboardRoutes,
  topicRoutes,
  eventRoutes,
  scheduleRoutes,
];

/** A Fastify instance with the queue it serves. */
export type TickwheelServer = FastifyInstance & {
  /** The queue; reading it before `opened` has resolved throws (ERR_TICKWHEEL_RECOVERING). */
  readonly queue: Queue;
  /** Resolves once the queue is open; rejects with the error that kept it from opening. */
  readonly opened: Promise<void>;
  /** Whether /v1 routes need a bearer token. */
  readonly tokenRequired: boolean;
};

function buildFastify(
  { bodyLimit, logLevel, requestTimeoutMs }: ServerSettings,
  logStream: ServerOptions['logStream'],
): FastifyInstance {
  return Fastify({
    logger: loggerOptions(logLevel, logStream),
    // One line per request instead, without headers or bodies (logging.ts).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit,
    routerOptions: { maxParamLength: 256 },
    // The lifecycle plugin answers with 503 in the API's error format instead.
    return503OnClosing: false,
    // Time to receive a whole request (long polls are not affected): a client trickling one in
    // cannot hold a connection or a close. Node checks it every connectionsCheckingInterval: 1 s.
    requestTimeout: requestTimeoutMs,
    http: {
      headersTimeout: requestTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(requestTimeoutMs / 10))),
      // Node would answer a missing Host with an empty 400: hostCheck answers it in JSON.
      requireHostHeader: false,
    },
    clientErrorHandler: handleClientError,
    frameworkErrors: handleFrameworkError,
    schemaErrorFormatter: formatSchemaErrors,
    ajv: {
      customOptions: {
        coerceTypes: false,
        removeAdditional: false,
        allErrors: false,
        verbose: true,
      },
    },
  });
}

export async function createServer(options: ServerOptions = {}): Promise<TickwheelServer> {
  const settings = checkServerOptions(options);
  const { token, allowedHosts, maxConnections } = settings;
  // Before the queue is opened: what goes wrong while it opens is logged too.
  const app = buildFastify(settings, options.logStream);
  try {
    const source = await startOpening(options, logFaults(app.log));
    const context: ServerContext = {
      queue: undefined as unknown as Queue, // Set once open (ServerContext.queue).
      state: 'opening',
      openError: undefined,
      opening: source.doing,
      metrics: new ServerMetrics(settings.metricsTopics),
      maxWaitMs: settings.maxWaitMs,
      version: VERSION,
      startedAt: performance.now(),
      closing: false,
    };
    const opened = watchOpening(source, context);
    if (options.openInBackground !== true) await opened;
    logRequests(app);
    // Before any route, so /openapi.json has them all. The plugins' order is their hooks' (Host,
    // the queue open, the /v1 token); each adds its errors to the routes registered after it.
    const routes = recordRoutes(app);
    await app.register(apiConventions);
    await app.register(hostAccess, { allowedHosts, ...(token === undefined ? {} : { token }) });
    await app.register(lifecycle, { context, source, opened, maxConnections });
    await app.register(requestMetrics, { metrics: context.metrics });
    await app.register(
      async (v1) => {
        await v1.register(apiAccess, token === undefined ? {} : { token });
        for (const group of API_ROUTES) await v1.register(group, { context });
      },
      { prefix: '/v1' },
    );
    await app.register(operationRoutes, { context, tokenRequired: token !== undefined });
    await app.register(openApiRoute, { routes, version: VERSION });
    await app.ready();
  } catch (err) {
    // Once the lifecycle is registered, its onClose hook closes the queue the server opened.
    await app.close().catch(() => undefined);
    throw err;
  }
  return app as unknown as TickwheelServer;
}
