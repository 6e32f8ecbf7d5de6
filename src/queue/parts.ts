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
  declare protected readonly store: Store;
  declare protected readonly clock: Clock;
  declare protected readonly near: NearHorizon;
  declare protected readonly horizon: Horizon;
  declare protected readonly waiters: Waiters;
  declare protected readonly locks: IdLocks;
  declare protected readonly report: QueueReport;
  declare protected readonly finished: FinishedMemory;
  declare protected readonly topics: TopicGate;

  constructor(parts: QueueParts) {
    Object.assign(this, parts);
  }
}
