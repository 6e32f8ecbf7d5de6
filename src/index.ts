/** tickwheel: timers, clocks, wheels, patterns and the error catalogue; no dependencies, no I/O. */

export {
  ManualClock,
  SystemClock,
  type SystemClockOptions,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
  type Clock,
} from './clock/index.js';
export * from './timer/index.js';
export {
  HashedWheel,
  HierarchicalWheel,
  TimingWheel,
  type ExpireCallback,
  type HashedWheelOptions,
  type HierarchicalWheelOptions,
  type WheelSnapshot,
} from './wheel/index.js';
export {
  AbortError,
  TickwheelCorruptError,
  TickwheelError,
  TickwheelOutcomeError,
  TickwheelRangeError,
  TickwheelStateError,
  TickwheelTypeError,
  TickwheelUnavailableError,
  type StoreDamage,
  type TickwheelErrorCode,
  type UnavailableErrorCode,
  type WriteOutcome,
} from './errors.js';
export * from './patterns/index.js';
