/**
 * What the route plugins share: the queue, the metrics, the limits, whether the queue is open
 * yet, and whether the server is closing (long polls end early, responses ask clients to drop
 * their connections).
 */

import type { Queue } from '../queue/api.js';
import type { ServerMetrics } from './metrics.js';

export interface ServerContext {
  /**
   * The queue. Set once it is open; the lifecycle plugin refuses every request but /healthz
   * before that, so a route handler may read it as it is (and must read it per request, not
   * once).
   */
  queue: Queue;
  /** 'opening' until the queue is open; 'failed' if it could not be opened. */
  state: 'opening' | 'open' | 'failed';
  /** Why it could not be opened, once 'failed'. */
  openError: unknown;
  readonly metrics: ServerMetrics;
  /** Longest long-poll of a receive; longer waitMs are capped to it. */
  readonly maxWaitMs: number;
  readonly version: string;
  readonly startedAt: number;
  /** Set once close() has begun. */
  closing: boolean;
}

/** The options of every route group's plugin. */
export interface RouteGroupOptions {
  context: ServerContext;
}
