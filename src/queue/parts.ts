/** The parts of the engine its producer and its deliveries share, built by engine.ts. */

import type { Clock } from '../clock/index.js';
import type { FinishedMemory } from './finished.js';
import type { Horizon } from './horizon.js';
import type { QueueReport } from './report.js';
import type { IdLocks } from './locks.js';
import type { NearHorizon } from './near.js';
import type { QueueSettings } from './options.js';
import type { Store } from './store.js';
import type { TopicGate } from './topics.js';
import type { Waiters } from './waiters.js';

export interface QueueParts {
  store: Store;
  clock: Clock;
  settings: QueueSettings;
  near: NearHorizon;
  horizon: Horizon;
  waiters: Waiters;
  locks: IdLocks;
  report: QueueReport;
  finished: FinishedMemory;
  topics: TopicGate;
}

/** The producer's and the deliveries' base: the shared parts, as fields of their own. */
export abstract class EnginePart {
  protected readonly store: Store;
  protected readonly clock: Clock;
  protected readonly near: NearHorizon;
  protected readonly horizon: Horizon;
  protected readonly waiters: Waiters;
  protected readonly locks: IdLocks;
  protected readonly report: QueueReport;
  protected readonly finished: FinishedMemory;
  protected readonly topics: TopicGate;

  constructor(parts: QueueParts) {
    this.store = parts.store;
    this.clock = parts.clock;
    this.near = parts.near;
    this.horizon = parts.horizon;
    this.waiters = parts.waiters;
    this.locks = parts.locks;
    this.report = parts.report;
    this.finished = parts.finished;
    this.topics = parts.topics;
  }
}
