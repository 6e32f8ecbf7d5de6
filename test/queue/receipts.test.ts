import { describe, expect, it } from 'vitest';
import { Receipts, type Receivable } from '../../src/queue/receipts.js';

function inflight(): Receivable {
  return { status: 'inflight', receipt: undefined, slot: -1 };
}

describe('Receipts', () => {
  it('finds the message in flight under its receipt, and only while it holds that receipt', () => {
    const receipts = new Receipts<Receivable>();
    const a = inflight();
    const b = inflight();
    const ra = receipts.issue(a);
    const rb = receipts.issue(b);
    expect(ra).not.toBe(rb);
    expect(a.receipt).toBe(ra);
    expect(receipts.owner(ra)).toBe(a);
    expect(receipts.owner(rb)).toBe(b);
    // Not in flight any more (received state changed): no owner.
    a.status = 'ready';
    expect(receipts.owner(ra)).toBeUndefined();
    a.status = 'inflight';
    // Released, its slot reused: the old receipt names the slot but not the new delivery.
    receipts.release(a);
    expect(a.slot).toBe(-1);
    expect(a.receipt).toBeUndefined();
    const c = inflight();
    const rc = receipts.issue(c);
    expect(c.slot).toBe(0);
    expect(receipts.owner(ra)).toBeUndefined();
    expect(receipts.owner(rc)).toBe(c);
    // A second delivery of the same message gets a new receipt; the first is stale.
    receipts.release(c);
    const rc2 = receipts.issue(c);
    expect(rc2).not.toBe(rc);
    expect(receipts.owner(rc)).toBeUndefined();
    expect(receipts.owner(rc2)).toBe(c);
  });

  it('answers undefined for malformed receipts and refuses a receipt that is not a string', () => {
    const receipts = new Receipts<Receivable>();
    const a = inflight();
    const ra = receipts.issue(a);
    for (const bad of [
      '',
      'x',
      ra.slice(0, -1),
      `${ra}0`,
      ra.replace('.', ''),
      `${ra}.`,
      'r'.repeat(600),
    ]) {
      expect(receipts.owner(bad), bad).toBeUndefined();
    }
    expect(() => receipts.owner(42)).toThrow(
      expect.objectContaining({ code: 'ERR_TICKWHEEL_INVALID_MESSAGE' }),
    );
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
});
