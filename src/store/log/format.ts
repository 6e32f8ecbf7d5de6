/**
 * The record format (docs/storage.md, The log) and its one decoder, checkRecord, which every
 * reading path uses: magic 0xA7 u8 | type u8 | body length u32 | CRC-32 of the type byte and
 * the body u32 | body, little-endian. Type 3 with the body "hi" is a7 03 02 00 00 00 18 5f 4d
 * 64 68 69. The length is outside the CRC: a damaged one shows as a CRC mismatch or a body
 * past the end.
 */

import { crc32 } from 'node:zlib';
import { writeU32 } from '../bytes.js';

export const RECORD_MAGIC = 0xa7;
export const RECORD_HEADER_BYTES = 10;
const HEADER = RECORD_HEADER_BYTES;

/** crc32 of each possible type byte: a record's CRC continues from its type's entry. */
const TYPE_CRC = Uint32Array.from({ length: 256 }, (_, type) => crc32(Uint8Array.of(type)));

/** checkRecord: fewer than a header's bytes, or no magic byte: no record starts here. */
export const NOT_A_RECORD = -1;
/** checkRecord: the body runs past the bytes available. */
export const CUT_SHORT = -2;
/** checkRecord: header and body are there, but the CRC does not match them. */
export const BAD_CRC = -3;

/**
 * Checks the record at `buf[at]`, `buf[at, limit)` available: the body's length (body from
 * `at + 10`, type `buf[at + 1]`), or NOT_A_RECORD, CUT_SHORT or BAD_CRC. Allocates nothing.
 */
export function checkRecord(buf: Buffer, at: number, limit: number): number {
  if (at < 0 || at + HEADER > limit || buf[at] !== RECORD_MAGIC) return NOT_A_RECORD;
  const length = buf.readUInt32LE(at + 2);
  if (length > limit - at - HEADER) return CUT_SHORT;
  const body = at + HEADER;
  const crc = crc32Range(buf, body, body + length, TYPE_CRC[buf[at + 1]]);
  return crc === buf.readUInt32LE(at + 6) ? length : BAD_CRC;
}

/** The body length a header claims, unchecked (for reading the rest of a record). */
export function claimedLength(buf: Buffer, at: number): number {
  return buf.readUInt32LE(at + 2);
}

/** Writes the header of a record whose `length`-byte body is already at `at + 10`. */
export function writeHeader(buf: Buffer, at: number, type: number, length: number): void {
  buf[at] = RECORD_MAGIC;
  buf[at + 1] = type;
  writeU32(buf, at + 2, length);
  writeU32(buf, at + 6, crc32Range(buf, at + HEADER, at + HEADER + length, TYPE_CRC[type]));
}

/** What a failed checkRecord means, for error messages. */
export function describeCheck(result: number): string {
  if (result === CUT_SHORT) return 'the record is cut short';
  if (result === BAD_CRC) return 'CRC mismatch';
  return 'no intact record header there (is it a record position?)';
}

/** Up to this many bytes the JavaScript loop is the faster of the two (measured on Node 20). */
const SHORT = 160;

/** TABLES[k * 256 + b]: the CRC contribution of byte b followed by k zero bytes. */
const TABLES = new Int32Array(8 * 256);
for (let b = 0; b < 256; b++) {
  let c = b;
  for (let bit = 0; bit < 8; bit++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  TABLES[b] = c;
}
for (let k = 1; k < 8; k++) {
  for (let b = 0; b < 256; b++) {
    const previous = TABLES[(k - 1) * 256 + b];
    TABLES[k * 256 + b] = (previous >>> 8) ^ TABLES[previous & 0xff];
  }
}

/**
 * zlib's `crc32(buf.subarray(start, end), seed)`. Short ranges are sliced by 8 here: for
 * ~100-byte records that beats calling zlib, which also needs a subarray.
 */
export function crc32Range(buf: Uint8Array, start: number, end: number, seed: number): number {
  if (end - start > SHORT) return crc32(buf.subarray(start, end), seed);
  const t = TABLES;
  let c = ~seed;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    c ^= buf[i] | (buf[i + 1] << 8) | (buf[i + 2] << 16) | (buf[i + 3] << 24);
    c =
      t[1792 + (c & 0xff)] ^
      t[1536 + ((c >>> 8) & 0xff)] ^
      t[1280 + ((c >>> 16) & 0xff)] ^
      t[1024 + (c >>> 24)] ^
      t[768 + buf[i + 4]] ^
      t[512 + buf[i + 5]] ^
      t[256 + buf[i + 6]] ^
      t[buf[i + 7]];
  }
  for (; i < end; i++) c = t[(c ^ buf[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}
