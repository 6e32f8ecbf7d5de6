/** What the route plugins share: the queue, the metrics, the limits, the server's state. */

import type { Queue } from '../queue/api.js';
import type { ServerMetrics } from './metrics.js';

export interface ServerContext {
  /** Set once open: the lifecycle refuses requests before that, so a handler reads it as it is. */
  queue: Queue;
  /** 'opening' until the queue is open; 'failed' if it could not be opened. */
  state: 'opening' | 'open' | 'failed';
  /** Why it could not be opened, once 'failed'. */
  openError: unknown;
  /** What it does while 'opening': "the queue is recovering its data directory", say. */
  readonly opening: string;
  readonly metrics: ServerMetrics;
  /** Longest long-poll of a receive; longer waitMs are capped to it. */
  readonly maxWaitMs: number;
  readonly version: string;
  readonly startedAt: number;
  /** Set once close() has begun. */
  closing: boolean;
}

export interface RouteGroupOptions {
  context: ServerContext;
}
