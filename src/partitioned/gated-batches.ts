/**
 * Items of any number of keys (partitions) gathered while the store is busy with earlier ones,
 * and handed over as one call once fewer than `most` calls are under way (at the end of a turn
 * when none is). Under light load each call carries what one turn brought; under heavy load the
 * calls grow instead of multiplying, so a store paying for each call and each commit keeps up,
 * up to `itemsPerCall`: a burst goes out in calls of that size, one after the other, so the
 * first of it is answered as soon as its call commits rather than once the whole burst has.
 * `minGapMs`: the least time from one call's start to the next's, so that a store paying a
 * fixed price for each call gets fewer, fuller ones under a steady trickle.
 */
export class GatedBatches<K, T> {
  private pending = new Map<K, T[]>();
  /** Items in `pending`. */
  private count = 0;
  private running = 0;
  private queued = false;
  private lastStart = -Infinity;

  constructor(
    private readonly flush: (batches: Map<K, T[]>) => Promise<unknown>,
    private readonly most = 1,
    private readonly itemsPerCall = Infinity,
    private readonly minGapMs = 0,
  ) {}

  add(key: K, item: T): void {
    let batch = this.pending.get(key);
    if (batch === undefined) this.pending.set(key, (batch = []));
    batch.push(item);
    this.count++;
    this.kick();
  }

  /** The next call's items: all pending, or `itemsPerCall` of them, key by key as the keys came. */
  private next(): Map<K, T[]> {
    if (this.count <= this.itemsPerCall) {
      const all = this.pending;
      this.pending = new Map();
      this.count = 0;
      return all;
    }
    const call = new Map<K, T[]>();
    let room = this.itemsPerCall;
    for (const [key, items] of this.pending) {
      if (room === 0) break;
      const part = items.length <= room ? items : items.splice(0, room);
      if (part === items) this.pending.delete(key);
      call.set(key, part);
      room -= part.length;
    }
    this.count -= this.itemsPerCall;
    return call;
  }

  private kick(): void {
    if (this.queued || this.running >= this.most || this.pending.size === 0) return;
    this.queued = true;
    const go = () => {
      // A timer counts from the event loop's time, which a long turn leaves behind: it can run
      // before minGapMs has passed. Then it waits out the rest.
      const waitMs = this.lastStart + this.minGapMs - performance.now();
      if (waitMs > 0) {
        setTimeout(go, Math.ceil(waitMs));
        return;
      }
      this.queued = false;
      if (this.running >= this.most || this.pending.size === 0) return;
      const batches = this.next();
      this.running++;
      this.lastStart = performance.now();
      // The flush answers its items itself; a rejection here has no one to reach.
      void this.flush(batches)
        .catch(() => undefined)
        .finally(() => {
          this.running--;
          this.kick();
        });
    };
    const waitMs = this.lastStart + this.minGapMs - performance.now();
    if (waitMs > 0) setTimeout(go, Math.ceil(waitMs));
    else setImmediate(go);
  }
}

/**
 * Items of one event-loop turn gathered per key and handed over at the end of the turn, each
 * key's as one batch: one call for a burst rather than one per item, with no gate.
 */
export function turnBatches<K, T>(flush: (key: K, batch: T[]) => void): GatedBatches<K, T> {
  return new GatedBatches<K, T>((batches) => {
    for (const [key, batch] of batches) flush(key, batch);
    return Promise.resolve();
  }, Infinity);
}
