/**
 * The message log's one decoder (src/store/log/format.ts): every read path asks checkRecord,
 * so its answers on good and damaged bytes are the log's answers. The worked example of the
 * format's comment is checked byte for byte.
 */

import { describe, expect, it } from 'vitest';
import {
  BAD_CRC,
  CUT_SHORT,
  NOT_A_RECORD,
  RECORD_HEADER_BYTES,
  checkRecord,
  describeCheck,
  writeHeader,
} from '../../src/store/log/format.js';

/** A record of `type` with `body`, at `at` in a buffer of `size` bytes. */
function record(type: number, body: Buffer, at = 0, size = at + RECORD_HEADER_BYTES + body.length) {
  const buf = Buffer.alloc(size);
  body.copy(buf, at + RECORD_HEADER_BYTES);
  writeHeader(buf, at, type, body.length);
  return buf;
}

describe('the log record format', () => {
  it('writes the worked example of its comment byte for byte', () => {
    expect(record(3, Buffer.from('hi')).toString('hex')).toBe('a70302000000185f4d646869');
  });

  it('reads a good record back: its body length, at any offset', () => {
    const buf = record(7, Buffer.from('payload'), 5, 40);
    expect(checkRecord(buf, 5, buf.length)).toBe(7);
    expect(buf[6]).toBe(7);
    expect(checkRecord(record(0, Buffer.alloc(0)), 0, RECORD_HEADER_BYTES)).toBe(0);
  });

  it('says NOT_A_RECORD without the magic byte or a whole header', () => {
    const buf = record(1, Buffer.from('abc'));
    expect(checkRecord(buf, 1, buf.length)).toBe(NOT_A_RECORD);
    expect(checkRecord(buf, 0, RECORD_HEADER_BYTES - 1)).toBe(NOT_A_RECORD);
    expect(checkRecord(buf, -1, buf.length)).toBe(NOT_A_RECORD);
    const noMagic = Buffer.from(buf);
    noMagic[0] = 0x00;
    expect(checkRecord(noMagic, 0, noMagic.length)).toBe(NOT_A_RECORD);
  });

  it('says CUT_SHORT when the body runs past the bytes available, or the length is damaged', () => {
    const buf = record(1, Buffer.from('abcdef'));
    expect(checkRecord(buf, 0, buf.length - 1)).toBe(CUT_SHORT);
    const longer = Buffer.from(buf);
    longer.writeUInt32LE(1_000, 2);
    expect(checkRecord(longer, 0, longer.length)).toBe(CUT_SHORT);
  });

  it('says BAD_CRC when a body byte, the type byte or the CRC itself changed', () => {
    const buf = record(2, Buffer.from('abcdef'));
    for (const at of [1, RECORD_HEADER_BYTES, RECORD_HEADER_BYTES + 5, 6, 9]) {
      const damaged = Buffer.from(buf);
      damaged[at] ^= 0x01;
      expect(checkRecord(damaged, 0, damaged.length), `byte ${at}`).toBe(BAD_CRC);
    }
    const shorter = Buffer.from(buf);
    shorter.writeUInt32LE(5, 2);
    expect(checkRecord(shorter, 0, shorter.length)).toBe(BAD_CRC);
  });

  it('agrees with zlib on long bodies (the CRC switches to zlib above 160 bytes)', () => {
    const body = Buffer.from(Array.from({ length: 5_000 }, (_, i) => (i * 31) & 0xff));
    const buf = record(9, body);
    expect(checkRecord(buf, 0, buf.length)).toBe(5_000);
    buf[3_000] ^= 0x80;
    expect(checkRecord(buf, 0, buf.length)).toBe(BAD_CRC);
  });

  it('names each failure for error messages', () => {
    expect(describeCheck(BAD_CRC)).toBe('CRC mismatch');
    expect(describeCheck(CUT_SHORT)).toBe('the record is cut short');
    expect(describeCheck(NOT_A_RECORD)).toMatch(/no intact record header/);
  });
});
