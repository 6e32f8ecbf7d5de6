/**
 * `tickwheel/client`: the delay queue's API over HTTP, for a `tickwheel serve` server, on Node's
 * built-in fetch (no dependencies); and the receiving end of pushes (verifyPush, pushListener).
 */

export { TickwheelClient } from './client.js';
export {
  DEFAULT_URL,
  type AckCallOptions,
  type CallOptions,
  type ClientOptions,
} from './options.js';
export type { ClientConsumeOptions } from './consumer.js';
export { TickwheelHttpError, TickwheelNetworkError, type CallOutcome } from './errors.js';
export type * from '../protocol/wire.js';
export type * from '../protocol/limits.js';
export type {
  ClusterDurability,
  ClusterStats,
  DeliveryLateness,
  FireLateness,
  PushStats,
  QueueCounters,
  QueueStats,
  RecoveryReport,
  RepairReport,
  StoreStats,
  TopicStateCounts,
} from '../protocol/model.js';
export { MAX_BATCH, MAX_RECEIPT_LENGTH, MAX_RECEIVE } from '../protocol/limits.js';
export type {
  ConsumeErrorContext,
  Consumer,
  ListOptions,
  ListPage,
  MessageHandler,
  MessageInfo,
  ReceivedMessage,
} from '../queue/types.js';
export type { QueueOperations } from '../queue/api.js';
export type { Backoff, MessageStatus, ScheduleRequest } from '../queue/message.js';
export { AbortError, TickwheelRangeError, TickwheelTypeError } from '../errors.js';
export {
  DEFAULT_PUSH_TOLERANCE_SECONDS,
  PUSH_HEADER,
  PushSignatureError,
  signPush,
  verifyPush,
  type PushDelivery,
  type PushHeaders,
  type VerifyPushOptions,
} from '../protocol/push-signature.js';
export { pushListener, type PushedMessage, type PushListenerOptions } from './push-receiver.js';
