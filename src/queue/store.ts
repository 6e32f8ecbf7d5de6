/**
 * The Store interface: everything the delay queue asks of storage. The queue keeps the near
 * horizon in memory (messages due soon, ready ones, in-flight ones); the store keeps every live
 * message durably and hands messages over as their due time comes within the horizon.
 *
 * Contract, for every implementation (file log, memory, later Redis):
 *   - a promise from add / move / finish / bury resolves only once the change is durable by the
 *     store's own promise (fsync policy for the file store);
 *   - `loadUntil(t, onDue)` hands over, once each, every live message with deliverAt < t that
 *     was not handed over before (by recover, an earlier loadUntil, or because the queue added
 *     or moved it with a due time already inside the horizon), in due-time order and, for equal
 *     due times, in the order they were scheduled;
 *   - after a crash, `recover` rebuilds the same set of live messages: nothing whose add, move,
 *     finish or bury had resolved is lost or undone;
 *   - `counts()` is exact for every change made so far, and after a crash equals what it was for
 *     every change whose promise had resolved.
 */

import type { RecoveryReport, StoreStats } from '../protocol/model.js';
import type { KeyedPart, ListQuery } from './list.js';
import type { PayloadBudget } from './payload-budget.js';
import type { MessageState, MessageStatus } from './message.js';
import type { ScheduleRecord } from './recurring.js';
import type { TopicSettings } from './topics.js';

export type { RecoveryReport, RepairReport, StoreStats } from '../protocol/model.js';

export interface StoredMessage extends MessageState {
  status: Extract<MessageStatus, 'scheduled' | 'dead'>;
}

export interface StoreCounts {
  /**
   * Per topic: live messages that are not dead (scheduled, ready or in flight: wherever held),
   * and dead ones. Topics with neither are absent.
   */
  topics: Map<string, { pending: number; dead: number }>;
}

/** What the queue tells a store of its deliveries (Store.useDeliveries). */
export interface StoreDeliveries {
  delivering(message: MessageState): boolean;
  inFlight(): readonly MessageState[];
}

export interface Store {
  /**
   * The horizon the store will actually cover when asked for `until`: a store that loads whole
   * time windows rounds up to a window boundary. The queue keeps in memory every message due
   * before this.
   */
  horizonEnd(until: number): number;
  /**
   * Rebuilds state after open. Messages with deliverAt < horizon are handed to onDue (they go
   * into the queue's memory); the rest stay with the store.
   */
  recover(horizon: number, onDue: (message: MessageState) => void): Promise<RecoveryReport>;
  /**
   * Optional, for a store that outlives its process: when its data was last written before this
   * open (wall-clock epoch ms), read before recover(); undefined when it has no data.
   */
  lastWrittenAt?(): Promise<number | undefined>;
  /** Whether a live (not finished) message has this id, and if so its current state. */
  lookup(id: string): Promise<StoredMessage | undefined>;
  /** Records a new message; sets message.ref. `inHorizon`: the queue keeps it in memory. */
  add(message: MessageState, inHorizon: boolean): Promise<void>;
  /**
   * Records a new due time and attempt count (reschedule, retry, requeue from dead).
   * `message.deliverAt` is the new due time; `previousDeliverAt` the one the store has for the
   * message until now (its latest add, move or bury), which the counts move it from.
   */
  move(message: MessageState, inHorizon: boolean, previousDeliverAt: number): Promise<void>;
  /** Records the end of a message: acknowledged or cancelled. `message.deliverAt` is current. */
  finish(message: MessageState, outcome: 'acked' | 'cancelled'): Promise<void>;
  /**
   * Records that a message ran out of attempts; it stays listed as dead until requeued or
   * purged. `message.deliverAt` is current (the due time the store has for it).
   */
  bury(message: MessageState): Promise<void>;
  /**
   * Optional: `messages[0, count)` were just handed to a consumer, each with `attempts` already
   * counting this delivery. A store that outlives its process records it so that a delivery
   * the process never got to end (a crash in the handler) still counts: at recovery such a
   * message comes back with its attempts, or is buried if that was its last allowed one.
   * Synchronous and not waited for: the record may reach the disk with the store's next
   * write (and need not, for a delivery that ended before it: see useDeliveries), so a crash
   * just after a hand-out may lose its count.
   */
  handOut?(messages: readonly MessageState[], count: number): void;
  /**
   * Optional, for a store that records hand-outs: what the queue knows of its deliveries, which
   * the store may ask at any time. `delivering(message)`: a delivery handed out (handOut) is
   * still in progress, its handler not done (a message acked, nacked or timed out since, or
   * whose handler returned and whose ack is only put off, is not); `inFlight()`: the messages
   * in flight now.
   */
  useDeliveries?(deliveries: StoreDeliveries): void;
  /** Hands over live messages due before `until` (see the contract above). */
  loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void>;
  /**
   * Optional (list() needs it): the live, not-dead messages of `query.topic` that the store
   * has not handed to the queue (due at or after the horizon, or whose load failed), due in
   * [from, until) and after `query.after`, in key order (list.ts: deliverAt, then `seq` = the
   * message's `ref`), at most `query.limit + 1`, without their payloads. `through`: every such
   * message with a key up to it is in `items` (undefined: every such message is). A store may
   * stop early to bound the work of one call, and answer few items (even none) with a
   * `through` short of the end; it must make progress: `through` after `query.after`.
   */
  listWaiting?(query: ListQuery): Promise<KeyedPart<StoredMessage>>;
  /** The encoded payload of a message whose `payload` is not in memory. */
  payloadOf(message: MessageState): Promise<Uint8Array>;
  /** Dead messages of a topic, oldest first. */
  dead(topic: string, limit: number): Promise<StoredMessage[]>;
  /**
   * Counts of live messages per topic and per minute (see StoreCounts): kept up to date with
   * every change, so this only copies them.
   */
  counts(): StoreCounts;
  /**
   * Optional: live, not-dead messages by the minute their deliverAt falls in: minute number
   * (floor(deliverAt / 60,000)) -> count, minutes with 0 absent, kept up to date like counts().
   * The store's own map, not a copy (the dashboard's timeline reads it every second, and it may
   * hold an entry per pending message): read it before the store changes again. Without it the
   * timeline counts only what the queue holds in memory.
   */
  dueMinutes?(): ReadonlyMap<number, number>;
  /**
   * Topics' settings (pause, rate limit: topics.ts), those other than the defaults, as last
   * written. A store that cannot read them back rejects (never answers "not paused" instead).
   */
  readTopicSettings(): Promise<Map<string, TopicSettings>>;
  /** Replaces every topic's settings; resolves once durable. */
  writeTopicSettings(settings: ReadonlyMap<string, TopicSettings>): Promise<void>;
  /** Recurring schedules' records (recurring.ts) as last written; rejects if unreadable. */
  readSchedules(): Promise<ScheduleRecord[]>;
  /** Writes schedules' records and forgets the `deleted` names; resolves once durable. */
  writeSchedules(records: readonly ScheduleRecord[], deleted: readonly string[]): Promise<void>;
  stats(): StoreStats;
  /**
   * Optional, for a store that can read a held message's payload back at any time (payloadOf):
   * the budget of payload bytes the queue holds, which the store keeps to when it hands
   * messages over, reading no more payloads into memory than fit.
   */
  usePayloadBudget?(budget: PayloadBudget): void;
  /**
   * Optional: a fault the store is retrying by itself (a background write that fails), as a
   * sentence saying what and since when; undefined while there is none.
   */
  problem?(): string | undefined;
  close(): Promise<void>;
}
