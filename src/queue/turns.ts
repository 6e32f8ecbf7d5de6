/**
 * Turns per key: operations on one key run one after another, in call order; a failed one does
 * not block the ones after it. The map holds only keys with work under way.
 */

export class Turns {
  protected readonly tails = new Map<string, Promise<unknown>>();

  /** Runs `fn` once every operation queued earlier on `key` has settled. */
  run<R>(key: string, fn: () => Promise<R>): Promise<R> {
    const previous = this.tails.get(key);
    const next = (previous === undefined ? fn() : previous.then(fn, fn)) as Promise<R>;
    const settled = next.catch(() => undefined);
    this.tails.set(key, settled);
    void settled.then(() => {
      if (this.tails.get(key) === settled) this.tails.delete(key);
    });
    return next;
  }

  get size(): number {
    return this.tails.size;
  }

  /** Resolves once every operation queued so far has settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.tails.values()]);
  }
}
