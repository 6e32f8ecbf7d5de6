export {
  checkAlarmClock,
  type Alarm,
  type AlarmClock,
  type AlarmOptions,
  type AlarmTarget,
  type Clock,
} from './clock.js';
export { SystemClock, defaultClock, type SystemClockOptions } from './system-clock.js';
export { ManualClock } from './manual-clock.js';
