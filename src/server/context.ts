/**
 * What the route plugins share: the queue, the metrics, the limits, and whether the server is
 * closing (long polls end early, responses ask clients to drop their connections).
 */

import type { DelayQueue } from '../queue-entry.js';
import type { ServerMetrics } from './metrics.js';

export interface ServerContext {
  readonly queue: DelayQueue;
  readonly metrics: ServerMetrics;
  /** Longest long-poll of a receive; longer waitMs are capped to it. */
  readonly maxWaitMs: number;
  readonly version: string;
  readonly startedAt: number;
  /** Set once close() has begun. */
  closing: boolean;
}
