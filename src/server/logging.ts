/**
 * The server's logs: Fastify's logger (pino), one JSON object a line with `level` (pino's
 * numbers: 30 info, 40 warn, 50 error), `time` (epoch ms) and `msg`, and fields of its own.
 *
 * - Requests: one line each, once answered (`request completed`), with the method, the path and
 *   query (at most MAX_LOGGED_URL characters), the client's address, the status and the time
 *   taken. Never a header (the Authorization one above all) nor a body: the serializers below
 *   are the only ones, and they pick fields rather than drop some. The probes of operators
 *   (/healthz, /metrics) log at debug: a scrape every 15 s is not news. At debug, a request is
 *   also logged as it arrives (`incoming request`), for one that never ends.
 * - The queue's background faults (src/queue/faults.ts), when the server opened the queue: one
 *   line each, at the fault's level, with its `code` and fields (`topic`, `dir`, `errno`, ...).
 */

import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { FaultHandler } from '../queue/faults.js';
import type { LogLevel } from './settings.js';

/** Longest path and query a request line holds. */
export const MAX_LOGGED_URL = 512;

/** Routes whose requests log at debug: what monitoring calls all day. */
const PROBES = new Set(['/healthz', '/metrics']);

type Serialized = Record<string, string | number | undefined>;

/** Fastify's `logger` option for the server. */
export function loggerOptions(
  level: LogLevel,
  stream: { write(line: string): unknown } | undefined,
): Record<string, unknown> {
  return {
    level,
    ...(stream === undefined ? {} : { stream }),
    serializers: {
      req: (request: FastifyRequest): Serialized => ({
        method: request.method,
        url: clip(request.url),
        remoteAddress: request.ip,
      }),
      res: (reply: FastifyReply): Serialized => ({ statusCode: reply.statusCode }),
    },
  };
}

/** The one line per request (Fastify's own two are turned off: disableRequestLogging). */
export function logRequests(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    request.log.debug({ req: request }, 'incoming request');
  });
  app.addHook('onResponse', async (request, reply) => {
    const probe = PROBES.has(request.routeOptions.url ?? '');
    request.log[probe ? 'debug' : 'info'](
      { req: request, res: reply, responseTime: Math.round(reply.elapsedTime * 10) / 10 },
      'request completed',
    );
  });
}

/** A queue's onFault that logs each fault as one line. */
export function logFaults(log: FastifyBaseLogger): FaultHandler {
  return (fault) => {
    const fields: Record<string, unknown> = { ...fault.fields, code: fault.code };
    // A fault without a code of its own is most likely a bug: its stack helps whoever fixes it.
    if (fault.code === 'ERR_TICKWHEEL_INTERNAL' && fault.error !== undefined) {
      fields.err = fault.error;
    }
    log[fault.level](fields, fault.message);
  };
}

function clip(url: string): string {
  return url.length <= MAX_LOGGED_URL ? url : `${url.slice(0, MAX_LOGGED_URL - 1)}…`;
}
