/**
 * The near horizon's held messages by id. A Map delete costs ~190 ns (the largest cost of an
 * ack), so a release leaves a stale entry; once stale entries outnumber the held (twice that
 * while a burst is delivered), a sweep moves the held into a new map, a step a turn.
 *
 * Ids this process made (ownIdNumber) skip the map: a Map.set of a string key into a map of
 * tens of thousands costs ~1 µs, a slot in an array of their numbers ~40 ns. Slots come in
 * chunks of CHUNK, dropped when none of theirs is held; an older chunk left with fewer than
 * SPARSE held moves them to the map (a long-held message never keeps a whole chunk alive).
 *
 * Invariants: a held message is the entry of its id in `byId`, or, while a sweep moves them,
 * `byId` has no entry for the id and `moving.from` has it; or it is in its number's slot, and
 * then no held message of its id is in the maps. A slot's entry of an id is later than the
 * maps'. `stale` >= the stale entries of `byId`; a chunk's `held` counts its held messages.
 */

import { ownIdNumber } from './message.js';
import type { NearMessage } from './near-message.js';

const CHUNK = 1024;
/** An older chunk with fewer held messages than this moves them to the map. */
const SPARSE = 32;

interface Chunk {
  slots: Array<NearMessage | undefined>;
  held: number;
}

/** Entries of the old id map a sweep moves a turn, at least (well under a millisecond's work). */
const SWEEP_STEP = 4096;
/** Stale id entries tolerated besides those the held count allows. */
const SWEEP_MIN = 4096;

export class HeldIds {
  /** Held messages by id, and stale entries of released ones. */
  private byId = new Map<string, NearMessage>();
  count = 0;
  /** Releases since `byId` was started: at least its stale entries. */
  private stale = 0;
  /** While a sweep runs: the previous id map, whose held messages move into `byId`. */
  private moving: { from: Map<string, NearMessage>; next: Iterator<NearMessage> } | undefined;
  private sweepQueued = false;
  /** Messages of ids this process made, by the id's number: chunk number → its slots. */
  private readonly chunks = new Map<number, Chunk>();
  /** The highest chunk number made yet (the one being filled is never moved to the map). */
  private newestChunk = -1;

  /** `readyWaiting`: whether ready messages wait (a burst is being delivered). */
  constructor(private readonly readyWaiting: () => boolean) {}

  /**
   * The latest entry of an id, stale or not. While a sweep moves entries, one in `byId` is the
   * later: a message held again, or another of the same id, is always put there.
   */
  entry(id: string): NearMessage | undefined {
    const n = ownIdNumber(id);
    if (n >= 0) {
      const slotted = this.chunks.get(Math.floor(n / CHUNK))?.slots[n % CHUNK];
      if (slotted !== undefined && slotted.id === id) return slotted;
    }
    const message = this.byId.get(id);
    return message !== undefined || this.moving === undefined ? message : this.moving.from.get(id);
  }

  /** Every held message, once each (stale entries skipped), in no particular order. */
  *held(): IterableIterator<NearMessage> {
    for (const chunk of this.chunks.values()) {
      for (const message of chunk.slots) if (message?.held === true) yield message;
    }
    for (const message of this.byId.values()) {
      if (message.held && this.byId.get(message.id) === message) yield message;
    }
    const moving = this.moving;
    if (moving === undefined) return;
    for (const message of moving.from.values()) {
      if (message.held && !this.byId.has(message.id)) yield message;
    }
  }

  /** A message is held (its `held` is set by the caller). */
  add(message: NearMessage): void {
    this.count++;
    const n = ownIdNumber(message.id);
    if (n >= 0) {
      const key = Math.floor(n / CHUNK);
      let chunk = this.chunks.get(key);
      if (chunk === undefined) {
        chunk = { slots: new Array<NearMessage | undefined>(CHUNK).fill(undefined), held: 0 };
        this.chunks.set(key, chunk);
        if (key > this.newestChunk) this.newestChunk = key;
      }
      const slotted = chunk.slots[n % CHUNK];
      // Taken by a held message of another id (a user's id that looks like one of ours): the map.
      if (slotted === undefined || !slotted.held) {
        chunk.slots[n % CHUNK] = message;
        chunk.held++;
        return;
      }
    }
    this.byId.set(message.id, message);
  }

  /** A held message was released (its `held` cleared by the caller): its entry is stale. */
  released(message: NearMessage): void {
    this.count--;
    const n = ownIdNumber(message.id);
    const key = Math.floor(n / CHUNK);
    const chunk = n < 0 ? undefined : this.chunks.get(key);
    if (chunk !== undefined && chunk.slots[n % CHUNK] === message) {
      chunk.held--;
      if (chunk.held === 0) this.chunks.delete(key);
      else if (chunk.held < SPARSE && key < this.newestChunk) this.unchunk(key, chunk);
      if (this.count === 0) this.queueSweep();
      return;
    }
    this.stale++;
    if (this.count === 0 || this.sweepDue()) this.queueSweep();
  }

  private unchunk(key: number, chunk: Chunk): void {
    this.chunks.delete(key);
    for (const message of chunk.slots)
      if (message?.held === true) this.byId.set(message.id, message);
  }

  /** No ready message waits any more: a sweep put off meanwhile may start. */
  readyDrained(): void {
    if (this.stale > this.count + SWEEP_MIN) this.queueSweep();
  }

  private sweepDue(): boolean {
    if (this.moving !== undefined) return false;
    const over = this.stale - SWEEP_MIN;
    return over > this.count && (!this.readyWaiting() || over > 2 * this.count);
  }

  private queueSweep(): void {
    if (this.sweepQueued) return;
    this.sweepQueued = true;
    setImmediate(this.sweep);
  }

  /** Drops the id maps when nothing is held; else moves a step of the held into a new map. */
  private readonly sweep = (): void => {
    this.sweepQueued = false;
    if (this.count === 0) {
      this.byId = new Map();
      this.moving = undefined;
      this.stale = 0;
      return;
    }
    let moving = this.moving;
    if (moving === undefined) {
      if (!this.sweepDue()) return; // held again meanwhile
      moving = this.moving = { from: this.byId, next: this.byId.values() };
      this.byId = new Map();
      this.stale = 0;
    }
    const { from, next } = moving;
    const step = Math.max(SWEEP_STEP, Math.ceil(from.size / 64));
    for (let i = 0; i < step; i++) {
      const entry = next.next();
      if (entry.done === true) {
        this.moving = undefined;
        return;
      }
      const message = entry.value;
      // A held message in the old map is its id's latest (entry()): byId has none of the id,
      // or has this message, held again since the sweep began.
      if (message.held) this.byId.set(message.id, message);
    }
    this.queueSweep();
  };
}
