/**
 * The embedded queue of the push benchmark, in a process of its own (forked by run.mjs, one
 * per cell): `DelayQueue.open({ dir })` from the build under test (dist.mjs), default options (fsync 'batch').
 *
 *   node bench/push/queue-cell.mjs <dir>
 *
 * Requests (the runner's queue handle, run.mjs, sends them):
 *   push { topic, target }          configureTopic(topic, { push: target })
 *   consume { topic, concurrency }  queue.consume() here, a handler that records the delivery
 *   schedule { topic, count, startMs, spreadMs }
 *   pause / resume { topic }
 *   drain { topic, timeoutMs }      resume, then wait until the topic has nothing pending:
 *                                   { seconds, cpuSeconds } of this process over it
 *   settle { topic, timeoutMs }     wait until the topic has nothing pending
 *   pushStats { topic }, summary, reset (of what the local consumer saw), close
 */

import { Arrivals } from './arrivals.mjs';
import { importDist } from './dist.mjs';
import { answerRequests, cpuSeconds } from './ipc.mjs';
import { scheduleRequests, untilDrained } from './workload.mjs';

const [dir] = process.argv.slice(2);
const { DelayQueue } = await importDist('delay-queue.js');
// The receivers are on loopback, which pushes reach only when allowed.
const queue = await DelayQueue.open({ dir, push: { allow: ['127.0.0.1'] } });
const arrivals = new Arrivals();
const consumers = [];

const pendingOf = async (topic) => (await queue.topicInfo(topic)).pending;

answerRequests({
  push: async ({ topic, target }) => void (await queue.configureTopic(topic, { push: target })),
  consume: ({ topic, concurrency }) => {
    consumers.push(
      queue.consume(topic, (message) => void arrivals.add(message.id, message.deliverAt), {
        concurrency,
      }),
    );
  },
  schedule: async (request) => {
    for (const batch of scheduleRequests(request)) await queue.scheduleMany(batch);
  },
  pause: async ({ topic }) => void (await queue.pause(topic)),
  resume: async ({ topic }) => void (await queue.resume(topic)),
  drain: async ({ topic, timeoutMs }) => {
    const cpu0 = cpuSeconds();
    const t0 = performance.now();
    await queue.resume(topic);
    await untilDrained(() => pendingOf(topic), timeoutMs, 5);
    const seconds = (performance.now() - t0) / 1000;
    return { seconds, cpuSeconds: cpuSeconds() - cpu0 };
  },
  settle: ({ topic, timeoutMs }) => untilDrained(() => pendingOf(topic), timeoutMs, 5),
  pushStats: async ({ topic }) => (await queue.stats()).push[topic] ?? null,
  summary: () => arrivals.summary(),
  reset: () => arrivals.reset(),
  close: async () => {
    await Promise.all(consumers.map((consumer) => consumer.close()));
    await queue.close();
  },
});
