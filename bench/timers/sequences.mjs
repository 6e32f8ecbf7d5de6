/**
 * The inputs of every workload, from a seeded mulberry32 generator, so that every peer (and the
 * JVM harness, bench/jvm/NettyBench.java, which has the same generator bit for bit) sees exactly
 * the same delays and the same operations in the same order.
 *
 * Seeds: `seed` for the initial delays, `seed + 1` for churn operations, `seed + 2` for the
 * storm's offsets, `seed + 3` for the steady-state periods.
 */

/** mulberry32: 32 bits of state, fast, good enough for benchmark inputs. Returns [0, 1). */
export function mulberry32(seed) {
  let state = seed | 0;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const MIN_DELAY_MS = 1_000;
export const MAX_DELAY_MS = 600_000;

function randomDelay(random) {
  return MIN_DELAY_MS + Math.floor(random() * (MAX_DELAY_MS - MIN_DELAY_MS + 1));
}

/** Whole-millisecond delays, uniform from 1 s to 10 min. */
export function randomDelays(seed, n) {
  const random = mulberry32(seed);
  const delays = new Float64Array(n);
  for (let i = 0; i < n; i++) delays[i] = randomDelay(random);
  return delays;
}

export function fixedDelays(n, delayMs) {
  return new Float64Array(n).fill(delayMs);
}

/**
 * Churn: `m` operations on `n` pending timers. Operation k touches timer `slot[k]`: when
 * `refresh[k]` it re-arms it with its own delay, otherwise it cancels it and schedules a
 * replacement with `delay[k]`. Either way `n` stay pending.
 */
export function churnOps(seed, m, n) {
  const random = mulberry32(seed + 1);
  const slot = new Int32Array(m);
  const refresh = new Uint8Array(m);
  const delay = new Float64Array(m);
  for (let k = 0; k < m; k++) {
    slot[k] = Math.floor(random() * n);
    refresh[k] = random() < 0.5 ? 1 : 0;
    delay[k] = randomDelay(random);
  }
  return { slot, refresh, delay };
}

/** Storm: where in the window each of the `n` timers is due, in ms from the window's start. */
export function stormOffsets(seed, n, windowMs) {
  const random = mulberry32(seed + 2);
  const offsets = new Float64Array(n);
  for (let i = 0; i < n; i++) offsets[i] = random() * windowMs;
  return offsets;
}

/**
 * Steady state: timers that re-arm themselves on their own period (500 to 1500 ms, whole ms),
 * each first due after a random phase within its period, as many as it takes for their rates
 * (1000 / period per second) to add up to `ratePerSecond`.
 */
export function steadyTimers(seed, ratePerSecond) {
  const random = mulberry32(seed + 3);
  const periods = [];
  const phases = [];
  for (let sum = 0; sum < ratePerSecond;) {
    const period = 500 + Math.floor(random() * 1001);
    periods.push(period);
    phases.push(Math.floor(random() * period));
    sum += 1000 / period;
  }
  return { periods: Float64Array.from(periods), phases: Float64Array.from(phases) };
}
