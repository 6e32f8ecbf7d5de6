// Pause a topic while something downstream is down, then let it drain no faster than the
// downstream can take: per-topic pause / resume and a rate limit (a token bucket), both kept in
// the data directory, so a restart does not forget them.
// Run: npm run build && node examples/topic-controls.mjs

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayQueue } from 'tickwheel/queue';

const dir = mkdtempSync(join(tmpdir(), 'tickwheel-example-'));
try {
  let queue = await DelayQueue.open({ dir });
  await queue.pause('invoices');
  await queue.scheduleMany(
    Array.from({ length: 6 }, (_, i) => ({ topic: 'invoices', payload: { invoice: i + 1 } })),
  );
  const sent = [];
  let consumer = queue.consume('invoices', (message) => void sent.push(message.payload.invoice));
  await sleep(300);
  console.log(
    `paused: ${sent.length} sent in 300 ms, ${(await queue.topicInfo('invoices')).pending} waiting`,
  );
  await consumer.close();
  await queue.configureTopic('invoices', { rateLimit: { perSecond: 10, burst: 2 } });
  await queue.close();

  // A restart keeps the topic paused and its limit.
  queue = await DelayQueue.open({ dir });
  const info = await queue.topicInfo('invoices');
  console.log(
    `after a restart: paused ${info.paused}, at most ${info.rateLimit.perSecond} a second`,
  );
  const started = performance.now();
  const times = [];
  consumer = queue.consume(
    'invoices',
    (message) => {
      sent.push(message.payload.invoice);
      times.push(performance.now() - started);
    },
    { concurrency: 4 },
  );
  await queue.resume('invoices');
  while (sent.length < 6) await sleep(20);
  await consumer.close();
  // A burst of 2, then one every 100 ms: the last of 6 comes after ~400 ms, not at once.
  console.log(`resumed: sent ${sent.join(', ')}`);
  console.log(`the last one ${times[5] >= 350 ? 'waited for its token' : 'came too soon'}`);
  await queue.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
