/** A binary min-heap by (due time, insertion order), for a store to hand messages over in order. */

export class DueHeap<T> {
  private due: number[] = [];
  private seq: number[] = [];
  private items: T[] = [];
  private counter = 0;

  get size(): number {
    return this.items.length;
  }

  push(due: number, item: T): void {
    this.due.push(due);
    this.seq.push(this.counter++);
    this.items.push(item);
    this.up(this.items.length - 1);
  }

  peekDue(): number {
    return this.items.length === 0 ? Infinity : this.due[0];
  }

  pop(): T | undefined {
    const n = this.items.length;
    if (n === 0) return undefined;
    const top = this.items[0];
    this.swap(0, n - 1);
    this.due.pop();
    this.seq.pop();
    this.items.pop();
    if (n > 1) this.down(0);
    return top;
  }

  private less(a: number, b: number): boolean {
    return this.due[a] < this.due[b] || (this.due[a] === this.due[b] && this.seq[a] < this.seq[b]);
  }

  private swap(a: number, b: number): void {
    [this.due[a], this.due[b]] = [this.due[b], this.due[a]];
    [this.seq[a], this.seq[b]] = [this.seq[b], this.seq[a]];
    [this.items[a], this.items[b]] = [this.items[b], this.items[a]];
  }

  private up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number): void {
    const n = this.items.length;
    while (true) {
      const left = 2 * i + 1;
      if (left >= n) return;
      const right = left + 1;
      const child = right < n && this.less(right, left) ? right : left;
      if (!this.less(child, i)) return;
      this.swap(i, child);
      i = child;
    }
  }
}
