/**
 * What a repair's replay learns of messages whose SCHEDULE it did not read (their later records
 * name them), and the live counts at the durable position, for the checkpoint's (repair.ts).
 */

import { IdTable } from './id-table.js';
import {
  FINISH,
  SCHEDULE,
  payloadPositionOf,
  recordId,
  topicLength,
  topicStart,
} from './records.js';
import { ReplayWatcher } from './table.js';
import { segmentOf } from '../log/index.js';

export class Untraced extends ReplayWatcher {
  /** Moved or buried, and not finished after: live, but their payload cannot be read. */
  readonly orphans = new Map<
    string,
    { topic: string; payloadPosition: number; position: number }
  >();
  /** Id hashes finished by a record read (of such a message or any other). */
  readonly finishes = new IdTable();
  /** Such finishes at or after the durable position, by the segment of their payload. */
  readonly finishedAfter = new Map<number, number>();
  /** Live payloads per segment (orphans included) when the replay reached the durable position. */
  atDurable: Map<number, number> | undefined;
  /** The first position the replay read. */
  firstRead = Infinity;

  /** `segmentLive`: the tables' live payloads per segment, which the replay keeps changing. */
  constructor(
    private readonly durableEnd: number,
    private readonly segmentLive: ReadonlyMap<number, number>,
  ) {
    super();
  }

  /** The replay is about to apply the record at `position`. */
  read(position: number): void {
    if (position < this.firstRead) this.firstRead = position;
    if (position >= this.durableEnd) this.capture();
  }

  /** Notes the live payloads per segment now, unless noted already. */
  capture(): void {
    if (this.atDurable !== undefined) return;
    const live = new Map(this.segmentLive);
    for (const { payloadPosition } of this.orphans.values()) {
      const segment = segmentOf(payloadPosition);
      live.set(segment, (live.get(segment) ?? 0) + 1);
    }
    this.atDurable = live;
  }

  override scheduled(body: Buffer, at: number): void {
    if (this.orphans.size > 0) this.orphans.delete(recordId(SCHEDULE, body, at));
  }

  override finished(low: number, high: number, position: number): void {
    this.finishes.set(low, high, position);
  }

  override unknown(
    type: number,
    body: Buffer,
    at: number,
    position: number,
    low: number,
    high: number,
  ): void {
    const id = recordId(type, body, at);
    if (type === FINISH) {
      this.finishes.set(low, high, position);
      if (this.orphans.delete(id)) return;
      if (position >= this.durableEnd) {
        const segment = segmentOf(payloadPositionOf(FINISH, body, at));
        this.finishedAfter.set(segment, (this.finishedAfter.get(segment) ?? 0) + 1);
      }
      return;
    }
    const topicAt = at + topicStart(type, body, at);
    this.orphans.set(id, {
      topic: body.toString('latin1', topicAt, topicAt + topicLength(type, body, at)),
      payloadPosition: payloadPositionOf(type, body, at),
      position,
    });
  }
}
