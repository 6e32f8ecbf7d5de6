// Watch what happens to messages: queue.events as an async iterator (the same events are an
// EventEmitter, and a Server-Sent Events stream at GET /v1/events of `tickwheel serve`).
// One message fails once and then succeeds; another fails until it is a dead letter.
// Run: npm run build && node examples/events.mjs

import { DelayQueue, MemoryStore } from 'tickwheel/queue';

const queue = await DelayQueue.open({ store: new MemoryStore() });
const stop = new AbortController();
const seen = [];
const watching = (async () => {
  for await (const event of queue.events.watch({ topic: 'orders', signal: stop.signal })) {
    const reason = event.reason === undefined ? '' : ` (${event.reason})`;
    seen.push(`${event.type} ${event.id} attempt ${event.attempts}${reason}`);
  }
})();

const backoff = { type: 'fixed', delayMs: 50 };
await queue.schedule({ topic: 'orders', id: 'order-1', payload: { ok: 'second time' }, backoff });
await queue.schedule({
  topic: 'orders',
  id: 'order-2',
  payload: { ok: 'never' },
  maxAttempts: 2,
  backoff,
});

let tries = 0;
const consumer = queue.consume(
  'orders',
  (message) => {
    if (message.id === 'order-2' || tries++ === 0) throw new Error('payment service said no');
  },
  // The failures are in the events (with their reason): no warning for each.
  { onError: () => {} },
);
queue.events.on('dead', (event) =>
  console.log(`dead letter: ${event.id} after ${event.attempts} attempts`),
);

while (
  !seen.some((line) => line.startsWith('dead')) ||
  !seen.some((line) => line.startsWith('acked'))
) {
  await new Promise((resolve) => setTimeout(resolve, 10));
}
await consumer.close();
console.log(seen.find((line) => line.startsWith('failed order-1')));
stop.abort();
await watching.catch(() => {});
for (const id of ['order-1', 'order-2']) {
  console.log(
    `${id}: ${seen
      .filter((line) => line.includes(` ${id} `))
      .map((line) => line.split(' ')[0])
      .join(' > ')}`,
  );
}
await queue.close();
