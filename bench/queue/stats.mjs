/** Lateness percentiles, memory snapshots and number formatting for the queue benchmark. */

import { readFileSync } from 'node:fs';

/** Nearest-rank percentile of ascending `sorted` (p in [0, 1]). */
export function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil(p * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/**
 * Collects lateness samples (delivery time minus due time, ms) without growing an array per
 * sample: a Float64Array that doubles when full.
 */
export class LatenessRecorder {
  constructor(capacity = 1 << 16) {
    this.samples = new Float64Array(capacity);
    this.count = 0;
  }

  add(ms) {
    if (this.count === this.samples.length) {
      const grown = new Float64Array(this.samples.length * 2);
      grown.set(this.samples);
      this.samples = grown;
    }
    this.samples[this.count++] = ms;
  }

  summary() {
    const sorted = this.samples.slice(0, this.count).sort();
    let early = 0;
    while (early < sorted.length && sorted[early] < 0) early++;
    const round = (value) => (value === null ? null : Math.round(value * 100) / 100);
    return {
      count: sorted.length,
      early,
      p50Ms: round(percentile(sorted, 0.5)),
      p90Ms: round(percentile(sorted, 0.9)),
      p99Ms: round(percentile(sorted, 0.99)),
      p999Ms: round(percentile(sorted, 0.999)),
      maxMs: round(sorted.length === 0 ? null : sorted[sorted.length - 1]),
    };
  }
}

/** Collects garbage twice (needs --expose-gc) so that only live memory is left. */
export function collectGarbage() {
  const gc = globalThis.gc;
  if (typeof gc !== 'function') {
    throw new Error('run with node --expose-gc: memory numbers need gc() to be meaningful');
  }
  gc();
  gc();
}

/** Memory of this process after a full GC: RSS, and what the JS heap and its buffers hold. */
export async function memorySnapshot() {
  // Let finished writes release their buffers, then collect.
  await new Promise((resolve) => setTimeout(resolve, 50));
  collectGarbage();
  const usage = process.memoryUsage();
  return {
    rss: usage.rss,
    heapTotal: usage.heapTotal,
    heapUsed: usage.heapUsed,
    arrayBuffers: usage.arrayBuffers,
    external: usage.external,
  };
}

export function perMessage(before, after, n) {
  const round = (bytes) => Math.round((bytes / n) * 10) / 10;
  return {
    rssBytes: round(after.rss - before.rss),
    heapAndBuffersBytes: round(
      after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers),
    ),
  };
}

export function formatCount(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '-';
  if (n >= 1e6 && n % 1e6 === 0) return `${n / 1e6}M`;
  if (n >= 1e3 && n % 1e3 === 0) return `${n / 1e3}k`;
  return String(n);
}

export function formatNumber(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return '-';
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** Milliseconds with sensible precision: 0.42 ms, 12.3 ms, 1,234 ms. */
export function formatMs(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '-';
  if (Math.abs(ms) < 10) return `${formatNumber(ms, 2)} ms`;
  if (Math.abs(ms) < 100) return `${formatNumber(ms, 1)} ms`;
  return `${formatNumber(ms)} ms`;
}

export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined || Number.isNaN(bytes)) return '-';
  return `${formatNumber(bytes, bytes < 100 ? 1 : 0)} B`;
}

/** "5.2x" for how many times better `ours` is than `theirs` (higher-is-better metrics). */
export function ratio(ours, theirs, lowerIsBetter = false) {
  if (typeof ours !== 'number' || typeof theirs !== 'number' || ours <= 0 || theirs <= 0) {
    return null;
  }
  return Math.round((lowerIsBetter ? theirs / ours : ours / theirs) * 100) / 100;
}

/**
 * CPU seconds (user + system, every thread) process `pid` has used so far, from /proc (Linux),
 * or null where it cannot be read: how a bench measures a server that is not its own process.
 * The figures are in USER_HZ ticks, 100 a second on Linux whatever the kernel's HZ, so a
 * reading is good to 10 ms.
 */
export function procCpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime, fields 14 and 15 of stat (11 and 12 counted from the state, field 3).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}
