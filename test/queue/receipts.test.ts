import { describe, expect, it } from 'vitest';
import { Receipts, type Receivable } from '../../src/queue/receipts.js';

function inflight(): Receivable {
  return { status: 'inflight', receiptNo: 0, slot: -1 };
}

/** Issues a receipt and returns it as a delivery carries it. */
function issue(receipts: Receipts<Receivable>, message: Receivable): string {
  receipts.issue(message);
  return receipts.receiptOf(message);
}

describe('Receipts', () => {
  it('finds the message in flight under its receipt, and only while it holds that receipt', () => {
    const receipts = new Receipts<Receivable>();
    const a = inflight();
    const b = inflight();
    const ra = issue(receipts, a);
    const rb = issue(receipts, b);
    expect(ra).not.toBe(rb);
    // The message keeps the counter only; the string is made for the delivery.
    expect(a.receiptNo).toBeGreaterThan(0);
    expect(receipts.receiptOf(a)).toBe(ra);
    expect(receipts.owner(ra)).toBe(a);
    expect(receipts.owner(rb)).toBe(b);
    // Not in flight any more (received state changed): no owner.
    a.status = 'ready';
    expect(receipts.owner(ra)).toBeUndefined();
    a.status = 'inflight';
    // Released, its slot reused: the old receipt names the slot but not the new delivery.
    receipts.release(a);
    expect(a.slot).toBe(-1);
    expect(a.receiptNo).toBe(0);
    const c = inflight();
    const rc = issue(receipts, c);
    expect(c.slot).toBe(0);
    expect(receipts.owner(ra)).toBeUndefined();
    expect(receipts.owner(rc)).toBe(c);
    // A second delivery of the same message gets a new receipt; the first is stale.
    receipts.release(c);
    const rc2 = issue(receipts, c);
    expect(rc2).not.toBe(rc);
    expect(receipts.owner(rc)).toBeUndefined();
    expect(receipts.owner(rc2)).toBe(c);
  });

  it('answers undefined for malformed receipts and refuses a receipt that is not a string', () => {
    const receipts = new Receipts<Receivable>();
    const a = inflight();
    const ra = issue(receipts, a);
    for (const bad of [
      '',
      'x',
      ra.slice(0, -1),
      `${ra}0`,
      ra.replace('.', ''),
      `${ra}.`,
      'r'.repeat(600),
      // Same slot and counter written another way, or another process's prefix.
      ra.replace('.', '.0'),
      `x${ra.slice(1)}`,
      `${ra.slice(0, ra.indexOf('.'))}.${'z'.repeat(11)}`,
      ra.toUpperCase(),
    ]) {
      expect(receipts.owner(bad), bad).toBeUndefined();
    }
  });

  it('reuses freed slots, so the table stays as large as the most in flight at once', () => {
    const receipts = new Receipts<Receivable>();
    const held = Array.from({ length: 10 }, inflight);
    for (let round = 0; round < 100; round++) {
      for (const m of held) receipts.issue(m);
      for (const m of held) receipts.release(m);
    }
    for (const m of held) receipts.issue(m);
    expect(Math.max(...held.map((m) => m.slot))).toBe(9);
  });

  it('finds every receipt it made past the slots whose heads it caches, also after reuse', () => {
    const receipts = new Receipts<Receivable>();
    const held = Array.from({ length: 20_000 }, inflight);
    const first = held.map((m) => issue(receipts, m));
    for (let i = 0; i < held.length; i++) expect(receipts.owner(first[i])).toBe(held[i]);
    for (let i = 0; i < held.length; i += 3) receipts.release(held[i]);
    const again = Array.from({ length: Math.ceil(held.length / 3) }, inflight);
    for (const m of again) expect(receipts.owner(issue(receipts, m))).toBe(m);
    // Released ones' receipts name a reused slot but not its new delivery.
    for (let i = 0; i < held.length; i += 3) expect(receipts.owner(first[i])).toBeUndefined();
  });
});
