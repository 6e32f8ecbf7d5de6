/**
 * Per-id locks: operations on one message id run one after another, in call order.
 *
 * A lock is the promise of the last operation queued on the id; the next one chains onto it,
 * whether it fulfilled or rejected (a failed operation does not block the ones after it). The
 * entry is removed once the last operation queued has settled, so the map holds only ids with
 * work under way, and `busy(id)` is false for an id nothing is running on: callers use that to
 * skip the lock (and its promises) on the common, uncontended path.
 */

export class IdLocks {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` once every operation queued earlier on `id` has settled. */
  run<R>(id: string, fn: () => Promise<R>): Promise<R> {
    const previous = this.tails.get(id);
    const next = (previous === undefined ? fn() : previous.then(fn, fn)) as Promise<R>;
    const settled = next.catch(() => undefined);
    this.tails.set(id, settled);
    void settled.then(() => {
      if (this.tails.get(id) === settled) this.tails.delete(id);
    });
    return next;
  }

  /** True while an operation queued on `id` has not settled. */
  busy(id: string): boolean {
    // (Asked on every ack: an empty map, the usual case, is not hashed into.)
    return this.tails.size !== 0 && this.tails.has(id);
  }

  /** How many ids have work under way. */
  get size(): number {
    return this.tails.size;
  }

  /** Resolves once every operation queued so far has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.tails.values()]);
  }
}
