/**
 * A consumer whose handler ends the process on one message (a poison message), as a test of
 * delivery attempts across crashes runs it, restarted after each crash:
 *
 *   node test/crash/poison-consumer.mjs <entry URL> <dir> <exit|kill> [--schedule]
 *
 * --schedule: first schedules 'poison' and good-0..good-4 on topic 'jobs' (maxAttempts 3).
 * Handling 'poison': `exit` calls process.exit(1) at once; `kill` does a little work first
 * (the hand-out's group commit has run by then) and then SIGKILLs itself. Good messages are
 * acked. Once all good ones were handled in this run, it prints the dead letters and exits 0.
 * Output: one JSON line per event.
 */

import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';

const [entry, dir, mode, ...flags] = process.argv.slice(2);
const { DelayQueue } = await import(entry);
const say = (event) => console.log(JSON.stringify(event));

const queue = await DelayQueue.open({ dir });
if (flags.includes('--schedule')) {
  await queue.schedule({ topic: 'jobs', id: 'poison', payload: 'poison', maxAttempts: 3 });
  for (let i = 0; i < 5; i++) {
    await queue.schedule({ topic: 'jobs', id: `good-${i}`, payload: `good-${i}`, maxAttempts: 3 });
  }
}
const handled = new Set();
let finishing = false;
const consumer = queue.consume('jobs', async (message) => {
  if (message.id === 'poison') {
    say({ event: 'poison', attempts: message.attempts });
    if (mode === 'exit') process.exit(1);
    await sleep(300); // the handler's work, during which it has not crashed yet
    process.kill(process.pid, 'SIGKILL');
    return;
  }
  say({ event: 'handled', id: message.id, attempts: message.attempts });
  handled.add(message.id);
  if (handled.size === 5 && !finishing) {
    finishing = true;
    setImmediate(async () => {
      await consumer.close();
      say({ event: 'dead', letters: await queue.deadLetters('jobs') });
      await queue.close();
    });
  }
});
