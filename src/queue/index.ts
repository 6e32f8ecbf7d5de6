export type {
  ConsumeErrorContext,
  ConsumeOptions,
  DelayQueueOptions,
  QueueOptions,
  MessageHandler,
  ListOptions,
  ListPage,
  MessageInfo,
  AckOptions,
  ScheduleOptions,
  TransactionClient,
  NackOptions,
  ReceiveOptions,
  ReceivedMessage,
} from './types.js';
export type { Backoff, MessageState, MessageStatus, ScheduleRequest } from './message.js';
export type { RecoveryReport, RepairReport, Store, StoreCounts, StoredMessage } from './store.js';
// What a Store of your own gets and gives in listWaiting().
export type { KeyedPart, ListKey, ListQuery } from './list.js';
export type {
  PushTargetInput,
  RateLimit,
  TopicInfo,
  TopicSettings,
  TopicUpdate,
} from './topics.js';
export { PushError } from './push-sender.js';
export { PushNotAllowedError, type PushOptions } from './push-guard.js';
export type { PushMethod, PushStats, PushTarget, PushTargetView } from './push.js';
export type {
  ClusterDurability,
  ClusterStats,
  DeliveryLateness,
  FireLateness,
  QueueCounters,
  QueueStats,
  StatsOptions,
  StoreStats,
  TopicListOptions,
  TopicPage,
  TopicStateCounts,
} from '../protocol/model.js';
export {
  PUSH_HEADER,
  PushSignatureError,
  verifyPush,
  type PushDelivery,
} from '../protocol/push-signature.js';
export type { ScheduleInfo } from './recurring.js';
export type { CatchUp, Overlap, RecurringSpec } from './recurring-spec.js';
export type { QueueEvent, QueueEventType, QueueEvents, WatchOptions } from './events.js';
export type {
  FaultCode,
  FaultField,
  FaultHandler,
  FaultLevel,
  FaultOnlyCode,
  QueueFault,
} from './faults.js';
