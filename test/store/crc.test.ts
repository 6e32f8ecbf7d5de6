import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { crc32Range } from '../../src/store/log/format.js';
import { seededBytes } from '../support/random.mjs';

describe('crc32Range', () => {
  it('equals zlib crc32 of the same range for every length 0-400, any offset and seed', () => {
    const buf = seededBytes(12345, 1024);
    for (let length = 0; length <= 400; length++) {
      const start = (length * 37) % 600;
      const seed = length % 3 === 0 ? 0 : Math.imul(length, 0x9e3779b9) >>> 0;
      expect(crc32Range(buf, start, start + length, seed)).toBe(
        crc32(buf.subarray(start, start + length), seed),
      );
    }
  });

  it('matches the published check value of "123456789"', () => {
    expect(crc32Range(Buffer.from('123456789'), 0, 9, 0)).toBe(0xcbf43926);
  });
});
