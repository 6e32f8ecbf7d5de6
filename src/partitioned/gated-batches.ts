/**
 * Items of any number of keys (partitions) gathered while the store is busy with earlier ones,
 * and handed over as one call once fewer than `most` calls are under way (at the end of a turn
 * when none is). Under light load each call carries what one turn brought; under heavy load the
 * calls grow instead of multiplying, so a store paying for each call and each commit keeps up.
 */
export class GatedBatches<K, T> {
  private pending = new Map<K, T[]>();
  private running = 0;
  private queued = false;

  constructor(
    private readonly flush: (batches: Map<K, T[]>) => Promise<unknown>,
    private readonly most = 1,
  ) {}

  add(key: K, item: T): void {
    let batch = this.pending.get(key);
    if (batch === undefined) this.pending.set(key, (batch = []));
    batch.push(item);
    this.kick();
  }

  private kick(): void {
    if (this.queued || this.running >= this.most || this.pending.size === 0) return;
    this.queued = true;
    setImmediate(() => {
      this.queued = false;
      if (this.running >= this.most || this.pending.size === 0) return;
      const batches = this.pending;
      this.pending = new Map();
      this.running++;
      // The flush answers its items itself; a rejection here has no one to reach.
      void this.flush(batches)
        .catch(() => undefined)
        .finally(() => {
          this.running--;
          this.kick();
        });
    });
  }
}
