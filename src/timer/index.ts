export {
  TimerWheel,
  type SleepOptions,
  type TimerHandle,
  type TimerWheelOptions,
  type TimerWheelStats,
} from './timer-wheel.js';
export {
  HashedWheelTimer,
  type HashedWheelTimerOptions,
  type Timeout,
  type TimeoutTask,
} from './hashed-wheel-timer.js';
export { SystemTimer, TimerTask, type SystemTimerOptions } from './system-timer.js';
