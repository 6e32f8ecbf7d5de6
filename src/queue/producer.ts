/**
 * The engine's producer side. Every change is durable in the store before memory follows. A
 * caller-given id is added under its lock (dedup and add are one step). A change to a message
 * not held is announced (`supersede`): a horizon load meanwhile must not take its stale copy.
 */

import type { Scheduled } from './backend.js';
import {
  isMaybeWritten,
  mayHaveWritten,
  outcomeUnknown,
  TickwheelOutcomeError,
} from '../errors.js';
import { newMessageId, type CheckedRequest, type MessageState } from './message.js';
import { nearMessage, type NearMessage } from './near-message.js';
import { EnginePart } from './parts.js';
import type { StoredMessage } from './store.js';

export class Producer extends EnginePart {
  /** A checked request (an id of '': one is made here; otherwise dedup by id). */
  async schedule(request: CheckedRequest): Promise<Scheduled> {
    const now = this.clock.now();
    const message = this.prepare(request, now);
    return request.id === '' ? this.add(message, now) : this.addUnique(message, now);
  }

  async scheduleMany(requests: readonly CheckedRequest[]): Promise<Scheduled[]> {
    const now = this.clock.now();
    const messages = new Array<NearMessage>(requests.length);
    for (let i = 0; i < requests.length; i++) messages[i] = this.prepare(requests[i], now);
    const results = new Array<Scheduled>(messages.length);
    const unique: Array<Promise<unknown>> = [];
    const plain: NearMessage[] = [];
    // Records of one group commit share a promise: the distinct ones are waited for.
    const durables: Array<Promise<void>> = [];
    const distinct: Array<Promise<void>> = [];
    // The horizon may move meanwhile: each message goes where the store was told it goes.
    const loadedUntil = this.horizon.loadedUntil;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i];
      if (requests[i].id !== '') {
        unique.push(this.addUnique(message, now).then((result) => (results[i] = result)));
        continue;
      }
      results[i] = { id: message.id, deliverAt: message.deliverAt };
      plain.push(message);
      if (message.deliverAt < now) this.report.handedInLate(message.id, now);
      const durable = this.store.add(message, message.deliverAt < loadedUntil);
      durables.push(durable);
      if (durable !== distinct[distinct.length - 1]) distinct.push(durable);
    }
    let failure: { error: unknown } | undefined;
    let failed: Set<Promise<void>> | undefined;
    // Messages whose write failed in a way that may have left it written (mayHaveWritten).
    const unknown: string[] = [];
    try {
      await Promise.all(distinct);
    } catch (error) {
      failure = { error };
      const outcomes = await Promise.allSettled(distinct);
      failed = new Set(distinct.filter((_, i) => outcomes[i].status === 'rejected'));
    }
    for (let i = 0; i < plain.length; i++) {
      if (failed?.has(durables[i])) {
        this.report.forgetLate(plain[i].id);
        if (isMaybeWritten(failure?.error)) unknown.push(plain[i].id);
        continue;
      }
      this.report.scheduled(plain[i]);
      // Held only now, after the batch is durable, like a single schedule().
      this.added(plain[i], plain[i].deliverAt < loadedUntil, true);
    }
    for (const outcome of await Promise.allSettled(unique)) {
      if (outcome.status === 'fulfilled') continue;
      failure ??= { error: outcome.reason };
      const error: unknown = outcome.reason;
      if (error instanceof TickwheelOutcomeError && error.id !== undefined) unknown.push(error.id);
    }
    if (failure === undefined) return results;
    // One message that may be written makes the whole answer uncertain: say which ones.
    if (unknown.length > 0) throw outcomeUnknown(failure.error, unknown);
    throw failure.error;
  }

  async cancel(id: string): Promise<boolean> {
    return this.locks.run(id, async () => {
      let message: MessageState | undefined = this.near.get(id);
      if (message === undefined) {
        const stored = await this.store.lookup(id);
        // A horizon load may have taken the message into memory while lookup ran.
        message = this.near.get(id) ?? stored;
        if (message === undefined) return false;
      }
      if (this.near.get(id) === message) this.near.release(message as NearMessage);
      else this.near.supersede(id);
      try {
        await this.store.finish(message, 'cancelled');
      } catch (err) {
        throw mayHaveWritten(err, id);
      }
      this.finished.remember(message, 'cancelled');
      this.report.cancelled(message);
      return true;
    });
  }

  /** Moves a scheduled or ready message to a new due time; undefined if in flight or gone. */
  async rescheduleTo(id: string, deliverAt: number): Promise<number | undefined> {
    const now = this.clock.now();
    return this.locks.run(id, async () => {
      let near = this.near.get(id);
      let message: NearMessage | StoredMessage | undefined = near;
      if (message === undefined) {
        const stored = await this.store.lookup(id);
        // A horizon load may have taken the message into memory while lookup ran.
        near = this.near.get(id);
        message = near ?? stored;
      }
      const status = message?.status;
      if (message === undefined || status === 'inflight' || status === 'dead') return undefined;
      if (near !== undefined) this.near.release(near);
      else this.near.supersede(id);
      const previous = message.deliverAt;
      message.deliverAt = deliverAt;
      if (deliverAt < now) this.report.handedInLate(id, now);
      try {
        await this.horizon.relocate(message, previous);
      } catch (err) {
        this.report.forgetLate(id);
        throw mayHaveWritten(err, id);
      }
      this.report.rescheduled();
      return deliverAt;
    });
  }

  /** Puts a dead message back, due at `deliverAt`, attempts reset. False if not dead. */
  async requeue(id: string, deliverAt: number): Promise<boolean> {
    return this.locks.run(id, async () => {
      const stored = await this.store.lookup(id);
      if (stored === undefined || stored.status !== 'dead') return false;
      const previous = stored.deliverAt;
      stored.deliverAt = deliverAt;
      stored.attempts = 0;
      try {
        await this.horizon.relocate(stored, previous);
      } catch (err) {
        throw mayHaveWritten(err, id);
      }
      return true;
    });
  }

  private prepare(request: CheckedRequest, now: number): NearMessage {
    const { id, topic, deliverAt, maxAttempts, backoff, payload, trace } = request;
    const message = nearMessage({
      id: id === '' ? newMessageId(now) : id,
      topic,
      deliverAt,
      attempts: 0,
      maxAttempts,
      backoff,
      payloadKind: payload.kind,
      payload: payload.bytes,
      ref: 0,
      trace,
    });
    message.payloadText = payload.text;
    return message;
  }

  /** Adds a message with a caller-given id, unless that id is pending already (dedup). */
  private addUnique(message: NearMessage, now: number): Promise<Scheduled> {
    return this.locks.run(message.id, async () => {
      const existing = this.near.get(message.id) ?? (await this.store.lookup(message.id));
      if (existing !== undefined && existing.status !== 'dead') {
        this.report.deduplicated();
        return { id: existing.id, deliverAt: existing.deliverAt };
      }
      return this.add(message, now);
    });
  }

  private async add(message: NearMessage, now: number): Promise<Scheduled> {
    const inHorizon = this.horizon.admits(message.deliverAt);
    if (message.deliverAt < now) this.report.handedInLate(message.id, now);
    try {
      await this.store.add(message, inHorizon);
    } catch (err) {
      this.report.forgetLate(message.id);
      throw mayHaveWritten(err, message.id);
    }
    this.report.scheduled(message);
    this.added(message, inHorizon, false);
    return { id: message.id, deliverAt: message.deliverAt };
  }

  /** A message the store has added: held if within the horizon, else its payload dropped. */
  private added(message: NearMessage, inHorizon: boolean, fresh: boolean): void {
    if (inHorizon) {
      this.near.hold(message, fresh);
    } else {
      message.payload = undefined;
      message.payloadText = undefined;
    }
  }
}
