/**
 * Calls of one event-loop turn gathered per key (a partition) and handed over as one batch per
 * key at the end of the turn: one function call for a burst rather than one per message.
 */
export class TurnBatches<K, T> {
  private readonly batches = new Map<K, T[]>();
  private queued = false;

  constructor(private readonly flush: (key: K, batch: T[]) => void) {}

  add(key: K, item: T): void {
    let batch = this.batches.get(key);
    if (batch === undefined) this.batches.set(key, (batch = []));
    batch.push(item);
    if (this.queued) return;
    this.queued = true;
    setImmediate(() => {
      this.queued = false;
      const batches = [...this.batches];
      this.batches.clear();
      for (const [key, batch] of batches) this.flush(key, batch);
    });
  }
}
