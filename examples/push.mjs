// HTTP push delivery: the queue sends each due message to a URL, signed, and retries what the
// receiver does not take. The receiver here is a node:http server with pushListener, which
// checks every request's signature before the handler sees it.
// Run: npm run build && node examples/push.mjs

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { URL } from 'node:url';
import { pushListener } from 'tickwheel/client';
import { DelayQueue } from 'tickwheel/queue';

const secret = randomBytes(32).toString('hex');
const dir = mkdtempSync(join(tmpdir(), 'tickwheel-example-'));
const taken = [];
let down = true;

// The receiver: fails every request while "down", then takes them.
const receiver = createServer(
  pushListener({ secret }, (message) => {
    if (down) throw new Error('the mail service is down');
    taken.push(message);
  }),
);
await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${receiver.address().port}/hooks/mail`;

// Pushes to loopback and private addresses are refused unless allowed: this receiver is on
// 127.0.0.1.
const queue = await DelayQueue.open({ dir, push: { allow: ['127.0.0.1'] } });
try {
  const topic = await queue.configureTopic('mail', {
    push: { url, secret, headers: { authorization: 'Bearer demo' }, concurrency: 4 },
  });
  console.log(
    `target: ${topic.push.method} ${new URL(topic.push.url).pathname}, headers ${topic.push.headerNames.join(', ')}`,
  );
  const backoff = { type: 'fixed', delayMs: 200 };
  await queue.schedule({
    topic: 'mail',
    id: 'welcome-1',
    payload: { to: 'ana@example.com' },
    backoff,
  });
  await queue.schedule({
    topic: 'mail',
    id: 'welcome-2',
    payload: { to: 'bo@example.com' },
    delayMs: 300,
    backoff,
  });

  // The first attempts fail: each message keeps the reason and comes back after its backoff.
  while ((await queue.get('welcome-1'))?.lastError === undefined) await pause(20);
  console.log(`first attempt failed: ${(await queue.get('welcome-1')).lastError}`);
  down = false;

  while ((await queue.topicInfo('mail')).pending > 0) await pause(20);
  for (const message of taken.sort((a, b) => a.id.localeCompare(b.id))) {
    console.log(`pushed ${message.id} to ${message.payload.to}, attempt ${message.attempt}`);
  }
  const stats = (await queue.stats()).push.mail;
  console.log(`succeeded ${stats.succeeded}, failed ${stats.failed}`);
} finally {
  await queue.close();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}

function pause(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
