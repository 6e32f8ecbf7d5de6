/**
 * createServer(): a Fastify instance serving one DelayQueue over HTTP (docs/http-api.md).
 *
 *   const server = await createServer({ dir: './data' });
 *   await server.listen({ port: 7700 });           // or server.inject(...) in tests
 *   ...
 *   await server.close();                          // drains requests, then closes the queue
 *
 * Plugins per concern: the /v1 routes (behind the bearer token when there is one) and the
 * operator routes (/healthz, /metrics, /). Hooks around them: refuse new requests while
 * closing, record request metrics, ask clients to drop their connections once closing starts.
 *
 * Closing, in order: preClose marks the server closing (new requests get 503, long polls end
 * within one poll slice, responses carry `Connection: close`); Fastify stops accepting
 * connections and waits for the requests in flight; then the queue is flushed and closed (when
 * the server opened it).
 */

import Fastify, { type FastifyInstance } from 'fastify';
import { checkOption, TickwheelTypeError } from '../errors.js';
import { DelayQueue, type DelayQueueOpenOptions, type FsyncPolicy } from '../queue-entry.js';
import { bearerAuth, checkToken } from './auth.js';
import type { ServerContext } from './context.js';
import {
  HttpError,
  handleClientError,
  handleError,
  handleFrameworkError,
  handleNotFound,
} from './errors.js';
import { ServerMetrics } from './metrics.js';
import { DEFAULT_BODY_LIMIT, DEFAULT_MAX_WAIT_MS, LOG_LEVELS, type LogLevel } from './settings.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { deliveryRoutes } from './routes/deliveries.js';
import { messageRoutes } from './routes/messages.js';
import { operationRoutes, statsRoute } from './routes/operations.js';
import { VERSION } from './version.js';

export interface ServerOptions {
  /** A queue you opened. The server uses it and leaves closing it to you. */
  queue?: DelayQueue;
  /** Data directory of the queue the server opens (and closes on close()), when no `queue`. */
  dir?: string;
  /** fsync policy of the queue the server opens. Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Further options for the queue the server opens (horizonMs, visibilityMs, ...). */
  queueOptions?: Omit<DelayQueueOpenOptions, 'dir' | 'fsync'>;
  /** When set, every /v1 request needs `Authorization: Bearer <token>`. */
  token?: string;
  /** Largest request body in bytes; larger ones get 413. Default 1 MiB. */
  bodyLimit?: number;
  /** Longest long poll of a receive, in ms; larger waitMs are capped to it. Default 20,000. */
  maxWaitMs?: number;
  /** Pino log level of the server's structured logs (JSON on stdout). Default 'warn'. */
  logLevel?: LogLevel;
}

/** A Fastify instance with the queue it serves. */
export type TickwheelServer = FastifyInstance & {
  readonly queue: DelayQueue;
  /** Whether /v1 routes need a bearer token. */
  readonly tokenRequired: boolean;
};

function checkLogLevel(level: unknown): LogLevel {
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `logLevel must be one of ${LOG_LEVELS.join(', ')}; got ${String(level)}`,
    );
  }
  return level as LogLevel;
}

async function openQueue(options: ServerOptions): Promise<DelayQueue> {
  if (options.queue !== undefined) return options.queue;
  if (typeof options.dir !== 'string' || options.dir === '') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      'give createServer() a data directory (dir) or an open queue (queue)',
    );
  }
  return DelayQueue.open({
    ...options.queueOptions,
    dir: options.dir,
    ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
  });
}

function buildFastify(bodyLimit: number, logLevel: LogLevel): FastifyInstance {
  return Fastify({
    logger: { level: logLevel },
    bodyLimit,
    routerOptions: { maxParamLength: 256 },
    // Our own onRequest hook answers with 503 in the API's error format instead.
    return503OnClosing: false,
    // Time to receive a whole request (not to answer it: long polls are not affected), so a
    // client that trickles a body in cannot hold a connection and a graceful close forever.
    requestTimeout: 30_000,
    clientErrorHandler: handleClientError,
    frameworkErrors: handleFrameworkError,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  });
}

export async function createServer(options: ServerOptions = {}): Promise<TickwheelServer> {
  const bodyLimit = checkOption(
    options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    'bodyLimit',
    1024,
    1024 ** 3,
    true,
  );
  const maxWaitMs = checkOption(
    options.maxWaitMs ?? DEFAULT_MAX_WAIT_MS,
    'maxWaitMs',
    0,
    3_600_000,
  );
  const token = options.token === undefined ? undefined : checkToken(options.token);
  const logLevel = checkLogLevel(options.logLevel ?? 'warn');
  const queue = await openQueue(options);
  const ownsQueue = options.queue === undefined;
  const context: ServerContext = {
    queue,
    metrics: new ServerMetrics(),
    maxWaitMs,
    version: VERSION,
    startedAt: performance.now(),
    closing: false,
  };

  let app: FastifyInstance;
  try {
    app = buildFastify(bodyLimit, logLevel);
  } catch (err) {
    if (ownsQueue) await queue.close().catch(() => undefined);
    throw err;
  }
  try {
    app.decorate('queue', queue);
    app.decorate('tokenRequired', token !== undefined);
    app.setErrorHandler(handleError);
    app.setNotFoundHandler(handleNotFound);

    // Callback-style hooks: these run on every request, and an async hook costs a promise each.
    app.addHook('onRequest', (_request, reply, done) => {
      if (!context.closing) return done();
      void reply.header('connection', 'close');
      done(new HttpError(503, 'ERR_TICKWHEEL_SHUTTING_DOWN', 'the server is shutting down'));
    });
    // Routes whose body is optional (receive, requeue, ...) accept a request without one.
    app.addHook('preValidation', (request, _reply, done) => {
      if (request.body === undefined) request.body = {};
      done();
    });
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (context.closing) void reply.header('connection', 'close');
      done(null, payload);
    });
    app.addHook('onResponse', (request, reply, done) => {
      context.metrics.observeRequest(
        request.method,
        request.routeOptions.url ?? 'unmatched',
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });
    app.addHook('preClose', async () => {
      context.closing = true;
    });
    app.addHook('onClose', async () => {
      if (ownsQueue) await queue.close();
    });

    await app.register(
      async (v1) => {
        if (token !== undefined) v1.addHook('onRequest', bearerAuth(token));
        messageRoutes(v1, context);
        deliveryRoutes(v1, context);
        statsRoute(v1, context);
        dashboardRoutes(v1, context);
      },
      { prefix: '/v1' },
    );
    operationRoutes(app, context, token !== undefined);
    await app.ready();
  } catch (err) {
    await app.close().catch(() => undefined);
    if (ownsQueue) await queue.close().catch(() => undefined);
    throw err;
  }
  return app as unknown as TickwheelServer;
}
