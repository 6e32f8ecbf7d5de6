/**
 * A consumer killed while the log write of its last acks has not happened, as the test of
 * acks that resolve before their group commit runs it:
 *
 *   node test/crash/ack-worker.mjs <dist URL> <dir>
 *
 * Schedules m-0..m-9 on topic 't', receives them, acks m-0..m-3 with { durable: true }, then
 * holds every log write (a write that never ends: the disk never gets those bytes) and acks
 * m-4..m-9 without it. Prints one JSON line with what the acks resolved to, then waits for
 * the parent's SIGKILL.
 */

import process from 'node:process';
import { setInterval } from 'node:timers';

const [dist, dir] = process.argv.slice(2);
const { DelayQueue } = await import(`${dist}/delay-queue.js`);
const { FileStore } = await import(`${dist}/store/file/file-store.js`);

let holdWrites = false;
const logIo = {
  async write(handle, buffer, offset, length, position) {
    if (holdWrites) await new Promise(() => {});
    return (await handle.write(buffer, offset, length, position)).bytesWritten;
  },
  async sync(handle) {
    await handle.datasync();
  },
};

const store = await FileStore.open({ dir, fsync: 'batch', logIo });
const queue = await DelayQueue.open({ store });
const ids = Array.from({ length: 10 }, (_, i) => `m-${i}`);
await queue.scheduleMany(ids.map((id) => ({ topic: 't', id, payload: id })));
const got = [];
while (got.length < ids.length) got.push(...(await queue.receive('t', { max: 10, waitMs: 1000 })));
got.sort((a, b) => Number(a.id.slice(2)) - Number(b.id.slice(2)));
const durable = [];
for (const message of got.slice(0, 4)) {
  durable.push(await queue.ack(message.receipt, { durable: true }));
}
holdWrites = true;
const applied = await Promise.all(got.slice(4).map((message) => queue.ack(message.receipt)));
const states = await Promise.all(got.map((message) => queue.get(message.id)));
console.log(
  JSON.stringify({ durable, applied, statuses: states.map((state) => state?.status ?? 'gone') }),
);
setInterval(() => {}, 1000);
