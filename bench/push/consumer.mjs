/**
 * The pull side of the served comparison, in a process of its own: `TickwheelClient.consume`
 * from tickwheel/client (dist.mjs) against a `tickwheel serve` server, with a handler that only
 * records the delivery, as the push receivers do.
 *
 *   node bench/push/consumer.mjs <server url> <topic> <concurrency>
 *
 * A delivery arrives when the handler is called. Requests: `cpu`, `reset`, `summary`, `close`.
 */

import { importDist } from './dist.mjs';
import { answerRequests, cpuSeconds } from './ipc.mjs';
import { Arrivals } from './arrivals.mjs';

const [url, topic, concurrency] = process.argv.slice(2);
const { TickwheelClient } = await importDist('client/index.js');
const client = new TickwheelClient({ url, retries: 0, timeoutMs: 60_000 });
const arrivals = new Arrivals();
client.consume(topic, (message) => void arrivals.add(message.id, message.deliverAt), {
  concurrency: Number(concurrency),
});

answerRequests({
  cpu: () => cpuSeconds(),
  reset: () => arrivals.reset(),
  summary: () => arrivals.summary(),
  close: () => client.close(),
});
