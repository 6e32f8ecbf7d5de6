/**
 * What GET /v1/events and POST /v1/topics/:topic/stream share: the response taken over from
 * Fastify, ended when the server or the connection closes, without waiting for a stalled reader.
 * Fastify's onResponse hooks never see a response taken over: its request line and metrics are
 * written here, when it ends.
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';
import { setImmediate as realSetImmediate } from 'node:timers';
import { logCompleted } from '../logging.js';
import type { ServerMetrics } from '../metrics.js';

export const KEEP_ALIVE_MS = 15_000;
/** Longest run of writes the open streams make, together, before the event loop gets a turn. */
export const TURN_MS = 10;

let turnStarted = Number.NEGATIVE_INFINITY;
let nextTurn: Promise<void> | undefined;

/**
 * A promise to await before the next write when the streams' shared run has lasted TURN_MS, else
 * undefined. A reader that keeps up has every write taken by the kernel at once, so a stream's
 * loop never waits for I/O: without turns, a burst of events written to each of many readers
 * holds the loop (and every other request) until all are written. The run is shared, so that
 * many streams cannot each take TURN_MS in the same turn. Node's own setImmediate: fake timers
 * installed by a test must not hold a stream up.
 */
export function turnDue(): Promise<void> | undefined {
  if (nextTurn === undefined && performance.now() - turnStarted < TURN_MS) return undefined;
  nextTurn ??= new Promise((resolve) =>
    realSetImmediate(() => {
      nextTurn = undefined;
      turnStarted = performance.now();
      resolve();
    }),
  );
  return nextTurn;
}

export class OpenStreams {
  private readonly ends = new Set<() => void>();

  constructor(
    app: FastifyInstance,
    private readonly metrics: ServerMetrics,
  ) {
    app.addHook('preClose', async () => {
      for (const end of [...this.ends]) end();
    });
  }

  /** Takes the response over and writes its head; `end` runs on shutdown or when it closes. */
  open(reply: FastifyReply, contentType: string, end: () => void): ServerResponse {
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, {
      'content-type': `${contentType}; charset=utf-8`,
      'cache-control': 'no-cache, no-store',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    this.ends.add(end);
    raw.on('close', end);
    raw.once('close', () => {
      logCompleted(reply.request, reply);
      this.metrics.observeAnswer(reply.request, reply);
    });
    return raw;
  }

  close(raw: ServerResponse, end: () => void): void {
    this.ends.delete(end);
    raw.off('close', end);
    // A reader that stopped reading would hold the end (and a shutdown) up: cut it off.
    if (raw.writableNeedDrain) raw.destroy();
    else raw.end();
  }
}

/** Resolves when the socket drains, closes, or `signal` aborts; leaves no listener behind. */
export function drained(
  raw: NodeJS.WritableStream & { destroyed?: boolean },
  signal: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      raw.off('drain', done);
      raw.off('close', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    if (signal.aborted || raw.destroyed) return resolve();
    raw.on('drain', done);
    raw.on('close', done);
    signal.addEventListener('abort', done, { once: true });
  });
}
