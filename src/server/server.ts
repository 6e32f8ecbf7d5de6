/**
 * createServer(): a Fastify instance serving one DelayQueue over HTTP (docs/http-api.md).
 *
 *   const server = await createServer({ dir: './data' });
 *   await server.listen({ port: 7700 });           // or server.inject(...) in tests
 *   ...
 *   await server.close();                          // drains requests, then closes the queue
 *
 * With `openInBackground`, createServer() resolves as soon as the data directory is locked,
 * before the queue has recovered it (seconds for a big one): the server can listen at once,
 * answering /healthz with 503 {status: "recovering"} and every other route with 503
 * ERR_TICKWHEEL_RECOVERING until the queue is open; `server.opened` settles then.
 *
 * Plugins per concern: the /v1 routes (behind the bearer token when there is one), the
 * operator routes (/healthz, /metrics, /) and GET /openapi.json, the API's description
 * generated from the routes' schemas (openapi.ts). Hooks around them: refuse Host names the
 * server does not answer to, refuse new requests while opening or closing, refuse
 * POSTs a web page could send without a preflight, record request metrics, ask clients to drop
 * their connections once closing starts.
 *
 * Closing, in order: preClose marks the server closing (new requests get 503, long polls end
 * within one poll slice, responses carry `Connection: close`); Fastify stops accepting
 * connections and waits for the requests in flight; then the queue is flushed and closed (when
 * the server opened it; one still opening is waited for first).
 */

import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { TickwheelTypeError } from '../errors.js';
import { checkOption } from '../validate.js';
import { MAX_WAIT_MS } from '../protocol/limits.js';
import { isErrorCode } from '../protocol/status.js';
import type { WireErrorCode } from '../protocol/wire.js';
import {
  DelayQueue,
  FileStore,
  type DelayQueueOpenOptions,
  type DelayQueueRedisOptions,
  type FsyncPolicy,
} from '../delay-queue.js';
import type { Queue } from '../queue/api.js';
import { bearerAuth, checkToken, requireToken } from './auth.js';
import { jsonBodies } from './body.js';
import { defaultMaxConnections, trackConnections } from './connections.js';
import type { ServerContext } from './context.js';
import {
  HttpError,
  httpError,
  handleClientError,
  handleError,
  handleFrameworkError,
  handleNotFound,
} from './errors.js';
import { ServerMetrics } from './metrics.js';
import { OPENAPI_PATH, openApiRoute, recordRoutes } from './openapi.js';
import { checkAllowedHosts, hostCheck, jsonPostsOnly } from './origin.js';
import {
  declareErrors,
  ERROR_SCHEMA,
  hasPathParams,
  readsBody,
  validatesInput,
} from './schemas/common.js';
import {
  DEFAULT_BODY_LIMIT,
  DEFAULT_MAX_WAIT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  LOG_LEVELS,
  RETRY_AFTER_SECONDS,
  type LogLevel,
} from './settings.js';
import { formatSchemaErrors } from './validation.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { deliveryRoutes } from './routes/deliveries.js';
import { messageRoutes } from './routes/messages.js';
import { operationRoutes, statsRoute } from './routes/operations.js';
import { topicRoutes } from './routes/topics.js';
import { eventRoutes } from './routes/events.js';
import { scheduleRoutes } from './routes/schedules.js';
import { VERSION } from './version.js';

export interface ServerOptions {
  /** A queue you opened (or are opening). The server uses it and leaves closing it to you. */
  queue?: Queue | Promise<Queue>;
  /** Data directory of the queue the server opens (and closes on close()), when no `queue`. */
  dir?: string;
  /**
   * Instead of `dir`: Valkey/Redis URL(s) of a queue shared by many servers (docs/cluster.md);
   * the server opens this process's node of it. Cluster settings go in `cluster`.
   */
  redis?: string | string[];
  /** Settings of the node the server opens with `redis` (queue name, partitions, durability). */
  cluster?: Omit<DelayQueueRedisOptions, 'redis'>;
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
  /** Pino log level of the server's structured logs (JSON lines). Default 'warn'. */
  logLevel?: LogLevel;
  /** Where the JSON log lines go. Default: stdout. */
  logStream?: { write(line: string): unknown };
  /**
   * Resolve before the queue is open (it is recovered in the background); until then the
   * server answers 503 (see the file's comment). The data directory is locked before
   * createServer() resolves either way. Default false: resolve once the queue is open.
   */
  openInBackground?: boolean;
  /**
   * The Host names (besides localhost and IP addresses) the server answers to; other names get
   * 421, as a page using DNS rebinding would send, token or not (origin.ts).
   */
  allowedHosts?: string[];
  /**
   * Time a connection has to send a whole request, headers and body, from when it opens or the
   * request starts; slower ones get 408 and are closed. Default 30,000.
   */
  requestTimeoutMs?: number;
  /**
   * Most connections open at once. At the cap, the connection that has waited longest without
   * sending a whole request is closed to make room for a new one (src/server/connections.ts).
   * Default: from the process's file limit, leaving a quarter of it (at least 128) to the
   * store; between 16 and 4096.
   */
  maxConnections?: number;
}

/** A Fastify instance with the queue it serves. */
export type TickwheelServer = FastifyInstance & {
  /** The queue; reading it before `opened` has resolved throws (ERR_TICKWHEEL_RECOVERING). */
  readonly queue: Queue;
  /** Resolves once the queue is open; rejects with the error that kept it from opening. */
  readonly opened: Promise<void>;
  /** Whether /v1 routes need a bearer token. */
  readonly tokenRequired: boolean;
};

/** Routes that answer while the queue is still opening: none needs the queue. */
const SERVED_WHILE_OPENING: ReadonlySet<string> = new Set([
  '/healthz',
  OPENAPI_PATH,
  '/favicon.ico',
]);

function checkLogLevel(level: unknown): LogLevel {
  if (!LOG_LEVELS.includes(level as LogLevel)) {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      `logLevel must be one of ${LOG_LEVELS.join(', ')}; got ${String(level)}`,
    );
  }
  return level as LogLevel;
}

interface QueueSource {
  queue: Promise<Queue>;
  /** Whether the server opened the queue (and so closes it). */
  owned: boolean;
}

/**
 * Starts opening the queue. The file store is opened (the directory locked, its format
 * checked) before this resolves, so that a directory in use fails createServer() itself;
 * recovery, the long part, is what `queue` waits for.
 */
async function startOpening(options: ServerOptions): Promise<QueueSource> {
  if (options.queue !== undefined) {
    const queue = Promise.resolve(options.queue);
    // Observed by whoever awaits it; this only keeps an early rejection from being unhandled.
    queue.catch(() => undefined);
    return { queue, owned: false };
  }
  if (options.redis !== undefined) {
    if (options.dir !== undefined) {
      throw new TickwheelTypeError(
        'ERR_TICKWHEEL_INVALID_OPTION',
        'give createServer() a data directory (dir) or Valkey/Redis URLs (redis), not both',
      );
    }
    const queue = DelayQueue.open({ ...options.cluster, redis: options.redis });
    queue.catch(() => undefined);
    return { queue, owned: true };
  }
  if (typeof options.dir !== 'string' || options.dir === '') {
    throw new TickwheelTypeError(
      'ERR_TICKWHEEL_INVALID_OPTION',
      'give createServer() a data directory (dir), Valkey/Redis URLs (redis) or an open queue (queue)',
    );
  }
  const { segmentBytes, windowMs, checkpointIntervalMs, snapshotBytes } =
    options.queueOptions ?? {};
  const store = await FileStore.open({
    dir: options.dir,
    ...(options.fsync === undefined ? {} : { fsync: options.fsync }),
    ...(segmentBytes === undefined ? {} : { segmentBytes }),
    ...(windowMs === undefined ? {} : { windowMs }),
    ...(checkpointIntervalMs === undefined ? {} : { checkpointIntervalMs }),
    ...(snapshotBytes === undefined ? {} : { snapshotBytes }),
  });
  // DelayQueue.open closes the store if recovery fails.
  const queue = DelayQueue.open({ ...options.queueOptions, store });
  queue.catch(() => undefined);
  return { queue, owned: true };
}

function buildFastify(
  bodyLimit: number,
  logLevel: LogLevel,
  logStream: ServerOptions['logStream'],
  requestTimeoutMs: number,
): FastifyInstance {
  return Fastify({
    logger: { level: logLevel, ...(logStream === undefined ? {} : { stream: logStream }) },
    bodyLimit,
    routerOptions: { maxParamLength: 256 },
    // Our own onRequest hook answers with 503 in the API's error format instead.
    return503OnClosing: false,
    // Time to receive a whole request (not to answer it: long polls are not affected), so a
    // client that trickles its headers or body in cannot hold a connection and a graceful
    // close for long. Node checks these timeouts every connectionsCheckingInterval (30 s by
    // default, which let a slow client stay up to twice the timeout): check every second.
    requestTimeout: requestTimeoutMs,
    http: {
      headersTimeout: requestTimeoutMs,
      requestTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, Math.max(10, Math.floor(requestTimeoutMs / 10))),
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
    MAX_WAIT_MS,
  );
  const token = options.token === undefined ? undefined : checkToken(options.token);
  const logLevel = checkLogLevel(options.logLevel ?? 'warn');
  const allowedHosts =
    options.allowedHosts === undefined ? [] : checkAllowedHosts(options.allowedHosts);
  const requestTimeoutMs = checkOption(
    options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    'requestTimeoutMs',
    100,
    3_600_000,
    true,
  );
  const maxConnections = checkOption(
    options.maxConnections ?? defaultMaxConnections(),
    'maxConnections',
    1,
    1_000_000,
    true,
  );
  const source = await startOpening(options);
  const closeQueue = async () => {
    if (!source.owned) return;
    const queue = await source.queue.catch(() => undefined);
    await queue?.close();
  };
  const context: ServerContext = {
    // Set once open: until then a hook refuses every request that would reach it.
    queue: undefined as unknown as Queue,
    state: 'opening',
    openError: undefined,
    metrics: new ServerMetrics(),
    maxWaitMs,
    version: VERSION,
    startedAt: performance.now(),
    closing: false,
  };
  const opened = source.queue.then(
    (queue) => {
      context.queue = queue;
      context.state = 'open';
    },
    (err: unknown) => {
      context.state = 'failed';
      context.openError = err;
      throw err;
    },
  );
  opened.catch(() => undefined);
  if (options.openInBackground !== true) await opened;

  let app: FastifyInstance;
  try {
    app = buildFastify(bodyLimit, logLevel, options.logStream, requestTimeoutMs);
  } catch (err) {
    await closeQueue().catch(() => undefined);
    throw err;
  }
  try {
    app.decorate('queue', {
      getter(): Queue {
        if (context.state !== 'open') {
          throw httpError(
            'ERR_TICKWHEEL_RECOVERING',
            'the queue is still opening (or failed to): await server.opened first',
          );
        }
        return context.queue;
      },
    });
    app.decorate('opened', opened);
    app.decorate('tokenRequired', token !== undefined);
    // Before any route: every route is recorded for /openapi.json, and the onRoute hooks
    // below add to each route's schema the errors the hooks next to them can answer with.
    const routes = recordRoutes(app);
    app.addSchema(ERROR_SCHEMA);
    app.setErrorHandler(handleError);
    app.setNotFoundHandler(handleNotFound);
    // Any route: a bug (500); malformed or over-long path parameters (400, 414).
    app.addHook('onRoute', declareErrors([500]));
    app.addHook('onRoute', declareErrors([400, 414], hasPathParams));
    jsonBodies(app);
    // The body parser and the body limit (and jsonPostsOnly's 415 on /v1); a request that
    // does not match the route's schemas.
    app.addHook('onRoute', declareErrors([400, 413, 415], readsBody));
    app.addHook('onRoute', declareErrors([400], validatesInput));

    // Callback-style hooks: these run on every request, and an async hook costs a promise each.
    app.addHook('onRequest', hostCheck(allowedHosts));
    app.addHook('onRoute', declareErrors([421]));
    app.addHook('onRequest', (request, reply, done) => {
      if (context.closing) {
        void reply.header('connection', 'close');
        return done(httpError('ERR_TICKWHEEL_SHUTTING_DOWN', 'the server is shutting down'));
      }
      if (context.state === 'open' || SERVED_WHILE_OPENING.has(request.routeOptions.url ?? '')) {
        return done();
      }
      done(notOpen(context, reply));
    });
    app.addHook('onRoute', declareErrors([503]));
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
    const connections = trackConnections(app.server, maxConnections, {
      closedAtCap: (action) => context.metrics.closedAtCap(action),
      warn: (message) => app.log.warn({ maxConnections }, message),
    });
    context.metrics.openConnections = () => connections.open;
    app.addHook('preClose', async () => {
      context.closing = true;
      connections.closeIdle();
    });
    app.addHook('onClose', closeQueue);

    await app.register(
      async (v1) => {
        if (token !== undefined) {
          v1.addHook('onRequest', bearerAuth(token));
          v1.addHook('onRoute', requireToken);
        }
        v1.addHook('onRequest', jsonPostsOnly);
        messageRoutes(v1, context);
        deliveryRoutes(v1, context);
        statsRoute(v1, context);
        dashboardRoutes(v1, context);
        topicRoutes(v1, context);
        eventRoutes(v1, context);
        scheduleRoutes(v1, context);
      },
      { prefix: '/v1' },
    );
    operationRoutes(app, context, token !== undefined);
    openApiRoute(app, routes, VERSION);
    await app.ready();
  } catch (err) {
    // app.close() runs the onClose hook, which closes the queue the server opened.
    await app.close().catch(() => undefined);
    throw err;
  }
  return app as unknown as TickwheelServer;
}

/** The 503 for a request that comes while the queue is opening, or after it failed to. */
function notOpen(context: ServerContext, reply: FastifyReply): HttpError {
  if (context.state === 'failed') {
    const error = context.openError as { code?: unknown; message?: unknown } | undefined;
    // What fails an open is the store's or an option's, never a client's or CLI code.
    return new HttpError(
      503,
      isErrorCode(error?.code) ? (error.code as WireErrorCode) : 'ERR_TICKWHEEL_INTERNAL',
      `the queue could not be opened: ${String(error?.message ?? error)}`,
    );
  }
  void reply.header('retry-after', RETRY_AFTER_SECONDS);
  return httpError(
    'ERR_TICKWHEEL_RECOVERING',
    'the queue is recovering its data directory; retry shortly (GET /healthz says when it is ready)',
  );
}
