export {
  QueueEngine,
  type ConsumeErrorContext,
  type ConsumeOptions,
  type DelayQueueOptions,
  type MessageHandler,
  type MessageInfo,
  type NackOptions,
  type ReceiveOptions,
  type ReceivedMessage,
} from './delay-queue.js';
export type { Backoff, MessageState, MessageStatus, ScheduleRequest } from './message.js';
export type { RecoveryReport, RepairReport, Store, StoreCounts, StoredMessage } from './store.js';
