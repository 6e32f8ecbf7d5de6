/**
 * The message log's record format, and its one decoder (checkRecord, which every reading path
 * uses). A record is a 10-byte header followed by its body:
 *
 *     offset  size  field
 *     0       1     magic 0xA7: marks where a record starts, so replay can resynchronise
 *     1       1     type 0..255, chosen by the store
 *     2       4     body length n, u32 little-endian
 *     6       4     CRC-32 (zlib/IEEE) of the type byte followed by the body, u32 little-endian
 *     10      n     body
 *
 * Worked example: type 3 with the body "hi" (68 69) is the 12 bytes
 *
 *     a7 03 02 00 00 00 18 5f 4d 64 68 69       crc32(03 68 69) = 0x644d5f18
 *
 * The length is outside the CRC: a damaged one shows as a CRC mismatch or a body past the end.
 */

import { crc32 } from 'node:zlib';
import { writeU32 } from '../bytes.js';
import { crc32Range } from '../crc.js';

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
