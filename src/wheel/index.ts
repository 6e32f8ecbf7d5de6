export { EntryStore, grown } from './entries.js';
export { TimingWheel, type ExpireCallback } from './wheel.js';
export {
  HierarchicalWheel,
  type HierarchicalWheelOptions,
  type WheelSnapshot,
} from './hierarchical-wheel.js';
export { HashedWheel, type HashedWheelOptions } from './hashed-wheel.js';
