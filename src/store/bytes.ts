/**
 * Little-endian fields without Buffer's checked helpers, whose checks cost more than the writes
 * on the hot paths. Callers keep offsets in bounds; each writer returns the offset after it.
 */

import { endianness } from 'node:os';

/** Typed arrays on this machine hold numbers little-endian: they can view on-disk bytes. */
export const LITTLE_ENDIAN = endianness() === 'LE';

const scratch = new Float64Array(1);
const scratchBytes = new Uint8Array(scratch.buffer);
/** Byte k of a little-endian double is scratchBytes[Bk] on this machine. */
const [B0, B1, B2, B3, B4, B5, B6, B7] = LITTLE_ENDIAN
  ? [0, 1, 2, 3, 4, 5, 6, 7]
  : [7, 6, 5, 4, 3, 2, 1, 0];

export function writeF64(buf: Uint8Array, at: number, value: number): number {
  scratch[0] = value;
  buf[at] = scratchBytes[B0];
  buf[at + 1] = scratchBytes[B1];
  buf[at + 2] = scratchBytes[B2];
  buf[at + 3] = scratchBytes[B3];
  buf[at + 4] = scratchBytes[B4];
  buf[at + 5] = scratchBytes[B5];
  buf[at + 6] = scratchBytes[B6];
  buf[at + 7] = scratchBytes[B7];
  return at + 8;
}

export function readF64(buf: Uint8Array, at: number): number {
  scratchBytes[B0] = buf[at];
  scratchBytes[B1] = buf[at + 1];
  scratchBytes[B2] = buf[at + 2];
  scratchBytes[B3] = buf[at + 3];
  scratchBytes[B4] = buf[at + 4];
  scratchBytes[B5] = buf[at + 5];
  scratchBytes[B6] = buf[at + 6];
  scratchBytes[B7] = buf[at + 7];
  return scratch[0];
}

export function writeU32(buf: Uint8Array, at: number, value: number): number {
  buf[at] = value;
  buf[at + 1] = value >>> 8;
  buf[at + 2] = value >>> 16;
  buf[at + 3] = value >>> 24;
  return at + 4;
}

export function writeU16(buf: Uint8Array, at: number, value: number): number {
  buf[at] = value;
  buf[at + 1] = value >>> 8;
  return at + 2;
}

/** ASCII text, one byte a character. */
export function writeAscii(buf: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) buf[at + i] = text.charCodeAt(i);
  return at + text.length;
}

/** UTF-8 at `at` (room: 3 bytes a UTF-16 unit); ASCII copied here. */
export function writeUtf8(buf: Buffer, at: number, text: string): number {
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return at + buf.write(text, at, 'utf8');
    buf[at + i] = c;
  }
  return at + n;
}
