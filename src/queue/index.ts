export { QueueEngine } from './engine.js';
export type {
  ConsumeErrorContext,
  ConsumeOptions,
  DelayQueueOptions,
  MessageHandler,
  MessageInfo,
  NackOptions,
  ReceiveOptions,
  ReceivedMessage,
} from './types.js';
export type { Backoff, MessageState, MessageStatus, ScheduleRequest } from './message.js';
export type { RecoveryReport, RepairReport, Store, StoreCounts, StoredMessage } from './store.js';
export type { RateLimit, TopicInfo, TopicSettings, TopicUpdate } from './topics.js';
export type { ScheduleInfo } from './recurring.js';
export type { CatchUp, Overlap, RecurringSpec } from './recurring-spec.js';
export type { QueueEvent, QueueEventType, QueueEvents, WatchOptions } from './events.js';
