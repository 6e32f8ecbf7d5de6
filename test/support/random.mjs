/**
 * A small seeded generator (mulberry32), so that a test's random choices replay from its seed.
 * Plain JavaScript, so that the plain `node` processes some tests start can import it too.
 */

import { Buffer } from 'node:buffer';

/** A generator of numbers in [0, 1): the same sequence for the same seed, on every run. */
export function seededRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A generator of whole numbers in [0, n), from the same sequence as seededRandom(seed). */
export function seededInt(seed) {
  const next = seededRandom(seed);
  return (n) => Math.floor(next() * n);
}

/** `length` bytes that depend only on `seed`. */
export function seededBytes(seed, length) {
  const next = seededRandom(seed);
  const bytes = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(next() * 256);
  return bytes;
}
