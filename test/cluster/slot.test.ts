import { describe, expect, it } from 'vitest';
import { crc16, slotOf } from '../../src/valkey/slot.js';

describe('slotOf', () => {
  it('computes CRC16/XMODEM as the Cluster specification does', () => {
    // The specification's check value: CRC16 of "123456789" is 0x31C3.
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
  });

  it('hashes only the hash tag when there is a non-empty one', () => {
    expect(slotOf('tw:{orders:5}:meta')).toBe(slotOf('orders:5'));
    expect(slotOf('{user1000}.following')).toBe(slotOf('{user1000}.followers'));
    expect(slotOf('foo{}{bar}')).toBe(slotOf('foo{}{bar}'));
    expect(slotOf('foo{}{bar}')).not.toBe(slotOf('bar'));
    expect(slotOf('foo{{bar}}zap')).toBe(slotOf('{bar'));
  });

  it('answers the slots Valkey gives (CLUSTER KEYSLOT)', () => {
    // Values from `valkey-cli CLUSTER KEYSLOT`.
    expect(slotOf('foo')).toBe(12182);
  });
});
