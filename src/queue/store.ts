/**
 * The Store: keeps every live message of the embedded engine durably, and hands messages over
 * as their due time comes within the horizon. Every implementation keeps this contract:
 *   - add / move / finish / bury resolve only once the change is durable by the store's promise;
 *   - `loadUntil(t, onDue)` hands over, once each, every live message with deliverAt < t not
 *     handed over before (by recover, a load, or an add or move inside the horizon), in due-time
 *     order, equal due times in scheduling order;
 *   - after a crash, `recover` rebuilds the live messages: no resolved change is lost or undone;
 *   - `counts()` is exact, and after a crash equals what it was for every resolved change.
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
  /** Per topic: pending messages (scheduled, ready or in flight) and dead ones; else absent. */
  topics: ReadonlyMap<string, Readonly<{ pending: number; dead: number }>>;
}

/** What the queue tells a store of its deliveries (Store.useDeliveries). */
export interface StoreDeliveries {
  delivering(message: MessageState): boolean;
  inFlight(): readonly MessageState[];
  /**
   * The message the queue holds under this id while it waits (scheduled or ready, not in
   * flight). A store that moves its payload sets its `ref` in the same turn.
   */
  resting(id: string): MessageState | undefined;
}

export interface Store {
  /** The horizon the store covers when asked for `until` (rounded up to its time windows). */
  horizonEnd(until: number): number;
  /** Rebuilds state after open, handing messages due before `horizon` to onDue. */
  recover(horizon: number, onDue: (message: MessageState) => void): Promise<RecoveryReport>;
  /** Optional: when the data was last written before this open (wall-clock ms), or undefined. */
  lastWrittenAt?(): Promise<number | undefined>;
  /** Whether a live (not finished) message has this id, and if so its current state. */
  lookup(id: string): Promise<StoredMessage | undefined>;
  add(message: MessageState, inHorizon: boolean): Promise<void>;
  /**
   * Records a new due time (`message.deliverAt`) and attempt count; `previousDeliverAt`: the due
   * time the store had, which its counts move the message from.
   */
  move(message: MessageState, inHorizon: boolean, previousDeliverAt: number): Promise<void>;
  /** Records the end of a message: acknowledged or cancelled. `message.deliverAt` is current. */
  finish(message: MessageState, outcome: 'acked' | 'cancelled'): Promise<void>;
  /** Records that a message ran out of attempts: dead until requeued or purged. */
  bury(message: MessageState): Promise<void>;
  /**
   * Optional: `messages[0, count)` were just handed to a consumer (`attempts` counting it), so a
   * delivery ended by a crash still counts at recovery. Not waited for: the record rides the
   * next write, so a crash just after a hand-out may lose its count.
   */
  handOut?(messages: readonly MessageState[], count: number): void;
  /** Optional: what the queue knows of its deliveries, which a store may ask at any time. */
  useDeliveries?(deliveries: StoreDeliveries): void;
  loadUntil(until: number, onDue: (message: MessageState) => void): Promise<void>;
  /**
   * Optional (list() needs it): the pending messages of `query.topic` not handed to the queue,
   * in the query's range, in key order (`seq` = `ref`), at most `query.limit + 1`, without
   * payloads. A store may stop early with a `through` short of the end, but after `query.after`.
   */
  listWaiting?(query: ListQuery): Promise<KeyedPart<StoredMessage>>;
  /** The encoded payload of a message whose `payload` is not in memory. */
  payloadOf(message: MessageState): Promise<Uint8Array>;
  dead(topic: string, limit: number): Promise<StoredMessage[]>;
  /**
   * Counts of live messages per topic, kept up to date with every change: the store's own map,
   * not a copy (it may hold every topic, read at every stats()): read it at once.
   */
  counts(): StoreCounts;
  /**
   * Optional: pending messages by minute (floor(deliverAt / 60,000)) -> count, zeros absent. The
   * store's own map, not a copy (it may be large, read every second): read it at once.
   */
  dueMinutes?(): ReadonlyMap<number, number>;
  /** Topics' settings other than the defaults; rejects if unreadable (never "not paused"). */
  readTopicSettings(): Promise<Map<string, TopicSettings>>;
  writeTopicSettings(settings: ReadonlyMap<string, TopicSettings>): Promise<void>;
  /** Recurring schedules' records (recurring.ts) as last written; rejects if unreadable. */
  readSchedules(): Promise<ScheduleRecord[]>;
  /** Writes schedules' records and forgets the `deleted` names; resolves once durable. */
  writeSchedules(records: readonly ScheduleRecord[], deleted: readonly string[]): Promise<void>;
  stats(): StoreStats;
  /** Optional, for a store that reads payloads back: the budget it keeps to when loading. */
  usePayloadBudget?(budget: PayloadBudget): void;
  /** Optional: a fault the store is retrying by itself, as a sentence; undefined if none. */
  problem?(): string | undefined;
  /** Optional: why the store takes no more changes (fail-stop), or undefined while it does. */
  refusal?(): Error | undefined;
  close(): Promise<void>;
}
