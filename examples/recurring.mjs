// Recurring schedules: a cron expression in a time zone, and a fixed interval. Each occurrence
// is an ordinary durable message, with the id <name>@<occurrence time>; a restart neither repeats
// one nor loses one (missed ones follow the schedule's catchUp).
// Run: npm run build && node examples/recurring.mjs

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayQueue } from 'tickwheel/queue';

const dir = mkdtempSync(join(tmpdir(), 'tickwheel-example-'));
try {
  let queue = await DelayQueue.open({ dir });
  const nightly = await queue.putSchedule('nightly-report', {
    topic: 'reports',
    cron: '30 2 * * *', // 02:30 every day, Berlin time (on the spring-forward day: 03:00)
    timezone: 'Europe/Berlin',
    payload: { report: 'sales' },
  });
  console.log(
    `nightly-report: next at ${new Date(nightly.nextAt).toISOString().slice(11, 16)} UTC`,
  );

  const startAt = Math.ceil(Date.now()) + 300;
  await queue.putSchedule('heartbeat', { topic: 'beats', everyMs: 1_000, startAt });
  const seen = new Set();
  const consume = (q) => q.consume('beats', (message) => void seen.add(message.id));
  let consumer = consume(queue);
  while (seen.size < 2) await sleep(20);
  await consumer.close();
  await queue.close();
  console.log(`before the restart: ${seen.size} heartbeats`);

  // Reopened: the occurrence created before the stop is delivered once, and the schedule goes on.
  queue = await DelayQueue.open({ dir });
  consumer = consume(queue);
  while (seen.size < 4) await sleep(20);
  await consumer.close();
  const ids = [...seen].map((id) => Number(id.split('@')[1]) - startAt);
  console.log(`after it: ${seen.size} heartbeats, at +${ids.join(' ms, +')} ms, none twice`);
  console.log(`schedules: ${(await queue.listSchedules()).map((s) => s.name).join(', ')}`);
  await queue.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
