// A burst through consume(): N messages due within 1 s, handled by consume() with concurrency
// 1000 (each handler returns at once and is acked). Prints CPU used and the drain after the
// last due time.
//   node bench/results/attempts/burst-cpu.mjs <dist folder> [n, default 1000000]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
const [dist, nArg] = process.argv.slice(2);
const n = Number(nArg ?? 1000000);
const { DelayQueue } = await import(pathToFileURL(join(dist, 'delay-queue.js')).href);
const dir = mkdtempSync(join(tmpdir(), 'burst-'));
const queue = await DelayQueue.open({ dir, fsync: 'batch' });
const first = Date.now() + 15000;
for (let i = 0; i < n; i += 1000) {
  const batch = [];
  for (let j = i; j < Math.min(n, i + 1000); j++) {
    batch.push({ topic: 't', payload: { j }, deliverAt: first + Math.floor((j * 1000) / n) });
  }
  await queue.scheduleMany(batch);
}
if (Date.now() > first - 2000) throw new Error('scheduling took too long');
while (Date.now() < first - 50) await new Promise((r) => setTimeout(r, 5));
const cpu0 = process.cpuUsage();
let got = 0;
let lastAt = 0;
let done;
const all = new Promise((resolve) => (done = resolve));
const consumer = queue.consume(
  't',
  () => {
    got++;
    if (got === n) {
      lastAt = Date.now();
      done();
    }
  },
  { concurrency: 1000 },
);
await all;
const cpu = process.cpuUsage(cpu0);
console.log(
  JSON.stringify({
    n,
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
    drainMs: lastAt - (first + 999),
  }),
);
await consumer.close();
await queue.close();
rmSync(dir, { recursive: true, force: true });
