// A pull consumer over a burst: N messages due at once, received 1,000 at a time with the acks
// of each batch awaited before the next receive. Prints the CPU used while draining (user +
// system), the drain time and the lateness p50 / p99.
//   node bench/results/attempts/pull-loop.mjs <dist folder> [n, default 200000]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
const [dist, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 200000);
const { DelayQueue } = await import(pathToFileURL(join(dist, 'delay-queue.js')).href);
const dir = mkdtempSync(join(tmpdir(), 'pull-'));
const queue = await DelayQueue.open({ dir, fsync: 'batch' });
const due = Date.now() + 3000;
for (let i = 0; i < n; i += 1000) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 1000); j++)
    batch.push({ topic: 't', payload: { j }, deliverAt: due });
  await queue.scheduleMany(batch);
}
while (Date.now() < due) await new Promise((r) => setTimeout(r, 5));
const late = [];
const started = performance.now();
const cpu0 = process.cpuUsage();
let got = 0;
while (got < n) {
  const batch = await queue.receive('t', { max: 1000, waitMs: 1000 });
  const t = Date.now();
  for (const m of batch) late.push(t - m.deliverAt);
  got += batch.length;
  await queue.ackMany(batch.map((m) => m.receipt));
}
const drainMs = performance.now() - started;
const cpu = process.cpuUsage(cpu0);
late.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    n,
    drainMs: Math.round(drainMs),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    p50: late[Math.floor(n * 0.5)],
    p99: late[Math.floor(n * 0.99)],
  }),
);
await queue.close();
rmSync(dir, { recursive: true, force: true });
