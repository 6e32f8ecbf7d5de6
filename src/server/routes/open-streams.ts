/**
 * What GET /v1/events and POST /v1/topics/:topic/stream share: the response taken over from
 * Fastify, ended when the server or the connection closes, without waiting for a stalled reader.
 * Fastify's onResponse hooks never see a response taken over: its request line and metrics are
 * written here, when it ends.
 */

import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';
import { logCompleted } from '../logging.js';
import type { ServerMetrics } from '../metrics.js';

export const KEEP_ALIVE_MS = 15_000;

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
