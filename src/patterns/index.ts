/** What applications build on timers: idle detection, heartbeats, deadlines, lease keep-alive. */

export { IdleTracker, type IdleHandle, type IdleState, type IdleTrackerOptions } from './idle.js';
export { Heartbeat, type HeartbeatOptions } from './heartbeat.js';
export {
  DeadlineRegistry,
  withDeadline,
  type DeadlineRegistryOptions,
  type RegisterOptions,
  type WithDeadlineOptions,
} from './deadlines.js';
export {
  LeaseKeeper,
  type Lease,
  type LeaseKeeperOptions,
  type LeaseOptions,
  type LeaseState,
} from './lease.js';
export { LeaseLostError, TimeoutError } from './errors.js';
export type { PatternOptions } from './pattern-wheel.js';
