/**
 * Load loops: `concurrency` workers each run `op` back to back until the time is up, and every
 * call's latency is recorded. An op returns how many messages it moved (1 for a single
 * schedule, the batch size for a batch).
 */

import { LatenessRecorder, percentile } from '../queue/stats.mjs';

/** Request latencies in ms: the queue bench's sample buffer, summarised as request latencies. */
export class Latencies extends LatenessRecorder {
  summary() {
    const sorted = this.samples.slice(0, this.count).sort();
    const at = (p) => {
      const value = percentile(sorted, p);
      return value === null ? null : Math.round(value * 100) / 100;
    };
    return {
      requests: sorted.length,
      p50: at(0.5),
      p90: at(0.9),
      p99: at(0.99),
      p999: at(0.999),
      max: at(1),
    };
  }
}

export async function timedLoad({ durationMs, concurrency, op }) {
  const latencies = new Latencies();
  let messages = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  const worker = async (index) => {
    while (performance.now() < deadline) {
      const t0 = performance.now();
      // Not `messages += await op()`: that would read `messages` before the await.
      const moved = await op(index);
      messages += moved;
      latencies.add(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, i) => worker(i)));
  const seconds = (performance.now() - started) / 1000;
  return { messages, seconds, latencyMs: latencies.summary() };
}
