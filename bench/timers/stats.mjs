/** Summaries of samples: medians of rounds and percentiles of lateness. */

export function median(samples) {
  if (samples.length === 0) return NaN;
  const sorted = Float64Array.from(samples).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile of ascending `sorted` (p in [0, 1]), as in NettyBench.java. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(p * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/**
 * Lateness in ms (fire time minus deadline; negative means early). NaN entries (timers that
 * never fired) are left out.
 */
export function latenessSummary(lateness) {
  const sorted = Float64Array.from(lateness).sort();
  let count = sorted.length;
  while (count > 0 && Number.isNaN(sorted[count - 1])) count--;
  const fired = sorted.subarray(0, count);
  let early = 0;
  while (early < count && fired[early] < 0) early++;
  return {
    early,
    minMs: count > 0 ? fired[0] : NaN,
    p50Ms: percentile(fired, 0.5),
    p90Ms: percentile(fired, 0.9),
    p99Ms: percentile(fired, 0.99),
    p999Ms: percentile(fired, 0.999),
    maxMs: count > 0 ? fired[count - 1] : NaN,
  };
}
