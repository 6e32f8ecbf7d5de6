/**
 * The server's logs: pino's JSON lines. One line per request once answered (probes at debug);
 * never a header (Authorization above all) nor a body: the serializers pick fields rather than
 * drop some. The background faults of a queue the server opened: one line each, with `code`.
 */

import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { FaultHandler } from '../queue/faults.js';
import type { LogLevel } from './settings.js';

/** Longest path and query a request line holds. */
const MAX_LOGGED_URL = 512;

/** Routes whose requests log at debug: what monitoring calls all day. */
const PROBES = new Set(['/healthz', '/metrics']);

type Serialized = Record<string, string | number | undefined>;

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
  app.addHook('onResponse', async (request, reply) => logCompleted(request, reply));
}

/** A request's line once answered, or once its stream (a response taken over) has ended. */
export function logCompleted(request: FastifyRequest, reply: FastifyReply): void {
  const probe = PROBES.has(request.routeOptions.url ?? '');
  request.log[probe ? 'debug' : 'info'](
    { req: request, res: reply, responseTime: Math.round(reply.elapsedTime * 10) / 10 },
    'request completed',
  );
}

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
