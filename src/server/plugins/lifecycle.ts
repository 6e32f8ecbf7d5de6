/**
 * The queue the server serves, from opening to closing, and the connection cap. Until the queue
 * is open, every request but SERVED_WHILE_OPENING's gets 503. Closing: preClose marks the server
 * closing (new requests 503, `Connection: close`, idle connections closed), Fastify waits for
 * the requests in flight, then onClose closes the queue if the server opened it.
 */

import type { FastifyReply } from 'fastify';
import { invalidOption } from '../../validate.js';
import { isErrorCode } from '../../errors.js';
import type { WireErrorCode } from '../../protocol/wire.js';
import {
  DelayQueue,
  FileStore,
  type FileStoreOptions,
  type DelayQueuePostgresOptions,
  type DelayQueueRedisOptions,
} from '../../delay-queue.js';
import type { FaultHandler } from '../../queue/faults.js';
import type { Queue } from '../../queue/api.js';
import { AT_CAPACITY, PIPELINED_TOO_DEEP, trackConnections } from '../connections.js';
import type { ServerContext } from '../context.js';
import { HttpError, httpError } from '../errors.js';
import { OPENAPI_PATH } from '../openapi.js';
import { declareErrors } from '../schemas/common.js';
import type { ServerOptions } from '../options.js';
import { RETRY_AFTER_SECONDS } from '../settings.js';
import { unencapsulated } from './unencapsulated.js';

/** Routes that answer while the queue is still opening: none needs the queue. */
const SERVED_WHILE_OPENING: ReadonlySet<string> = new Set([
  '/healthz',
  OPENAPI_PATH,
  '/favicon.ico',
]);

export interface QueueSource {
  queue: Promise<Queue>;
  /** Whether the server opened the queue (and so closes it). */
  owned: boolean;
  /** What the queue does while it opens, as /healthz and the 503s before it is open say it. */
  doing: string;
}

/**
 * Starts opening the queue the options name (or takes the one given). The file store is locked
 * before this resolves, so a directory in use fails createServer() itself; `queue` waits for
 * recovery. `onFault` takes the faults unless the options name theirs.
 */
export async function startOpening(
  options: ServerOptions,
  onFault: FaultHandler,
): Promise<QueueSource> {
  if (options.queue !== undefined) {
    return opening(Promise.resolve(options.queue), false, 'the queue is opening');
  }
  const stores = (['dir', 'redis', 'postgres'] as const).filter(
    (name) => options[name] !== undefined,
  );
  if (stores.length > 1) {
    throw invalidOption(
      `give createServer() one of a data directory (dir), Valkey/Redis URLs (redis) or a PostgreSQL connection string (postgres), not ${stores.join(' and ')}`,
    );
  }
  if (options.redis !== undefined) {
    const node = options.cluster as Omit<DelayQueueRedisOptions, 'redis'> | undefined;
    const queue = DelayQueue.open({ onFault, ...node, redis: options.redis });
    return opening(queue, true, 'the queue is connecting to Valkey/Redis and joining its nodes');
  }
  if (options.postgres !== undefined) {
    const node = options.cluster as Omit<DelayQueuePostgresOptions, 'postgres'> | undefined;
    const queue = DelayQueue.open({ onFault, ...node, postgres: options.postgres });
    return opening(queue, true, 'the queue is connecting to PostgreSQL and joining its nodes');
  }
  if (typeof options.dir !== 'string' || options.dir === '') {
    throw invalidOption(
      'give createServer() a data directory (dir), Valkey/Redis URLs (redis), a PostgreSQL connection string (postgres) or an open queue (queue)',
    );
  }
  // The data directory's options go to its store; the rest are the queue's.
  const { queueOnly, directory } = splitDirectoryOptions(options.queueOptions ?? {});
  const queueFaults = options.queueOptions?.onFault ?? onFault;
  const store = await FileStore.open({
    dir: options.dir,
    fsync: options.fsync,
    ...directory,
    onFault: queueFaults,
  });
  // DelayQueue.open closes the store if recovery fails.
  const queue = DelayQueue.open({ ...queueOnly, onFault: queueFaults, store });
  return opening(queue, true, 'the queue is recovering its data directory');
}

/** The data directory's options in a server's queueOptions: its store's, not the queue's. */
const DIRECTORY_OPTIONS = [
  'segmentBytes',
  'windowMs',
  'checkpointIntervalMs',
  'snapshotBytes',
  'listScanRecords',
  'repair',
] as const;

function splitDirectoryOptions<O extends object>(given: O) {
  const queueOnly: Record<string, unknown> = { ...(given as Record<string, unknown>) };
  const directory: Record<string, unknown> = {};
  for (const name of DIRECTORY_OPTIONS) {
    directory[name] = queueOnly[name];
    delete queueOnly[name];
  }
  return {
    queueOnly: queueOnly as Omit<O, (typeof DIRECTORY_OPTIONS)[number]>,
    directory: directory as Pick<FileStoreOptions, (typeof DIRECTORY_OPTIONS)[number]>,
  };
}

function opening(queue: Promise<Queue>, owned: boolean, doing: string): QueueSource {
  // Observed by whoever awaits it; this only keeps an early rejection from being unhandled.
  queue.catch(() => undefined);
  return { queue, owned, doing };
}

/** Moves `context` to 'open' or 'failed' when the queue settles; the promise is `server.opened`. */
export function watchOpening(source: QueueSource, context: ServerContext): Promise<void> {
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
  return opened;
}

export interface LifecycleOptions {
  context: ServerContext;
  source: QueueSource;
  opened: Promise<void>;
  maxConnections: number;
}

export const lifecycle = unencapsulated<LifecycleOptions>(
  'tickwheel-lifecycle',
  async (app, { context, source, opened, maxConnections }) => {
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

    const connections = trackConnections(app.server, maxConnections, {
      closedAtCap: (action) => context.metrics.closedAtCap(action),
      warn: (message) => app.log.warn({ maxConnections }, message),
    });
    context.metrics.openConnections = () => connections.open;

    app.addHook('onRequest', (request, reply, done) => {
      if (connections.onProbation(request.raw.socket)) {
        // Past the connection cap: a health check only (connections.ts), then closed.
        void reply.header('connection', 'close');
        if (request.routeOptions.url === '/healthz') return done();
        connections.refused(request.raw.socket);
        return done(httpError('ERR_TICKWHEEL_CAPACITY', AT_CAPACITY));
      }
      if (connections.pipelinedTooDeep(request.raw.socket)) {
        return done(httpError('ERR_TICKWHEEL_CAPACITY', PIPELINED_TOO_DEEP));
      }
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
    app.addHook('onSend', (_request, reply, payload, done) => {
      if (context.closing) void reply.header('connection', 'close');
      done(null, payload);
    });

    app.addHook('preClose', async () => {
      context.closing = true;
      connections.closeIdle();
    });
    app.addHook('onClose', async () => {
      if (source.owned) await (await source.queue.catch(() => undefined))?.close();
    });
  },
);

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
    `${context.opening}; retry shortly (GET /healthz says when it is ready)`,
  );
}
