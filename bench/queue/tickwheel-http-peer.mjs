/**
 * The tickwheel peer over HTTP: a `tickwheel serve` process the runner started (cells.mjs, the
 * same server bench:push runs: fsync 'batch', loopback, no token), with producers and a
 * consumer in this process using the client SDK of the build under test. Schedules are
 * `scheduleMany` requests (one per batch, answered once every record is fsynced); the consumer
 * is `TickwheelClient.consume`, whose receives take up to its free slots and whose acks of one
 * turn of the event loop go in one `ackMany` request. Acks are not durable when answered
 * (the server's default), as the embedded consume()'s are not.
 */

import { importDist } from '../push/dist.mjs';
import { epochNow } from '../push/arrivals.mjs';

const TOPIC = 'bench';

/**
 * The server's queue reads its own clock, which may trail the wall clock by up to a
 * millisecond; this process reads the wall clock (epochNow), never behind it, so a message
 * delivered on time shows 0 to 1 ms of lateness here, and none is counted early that was not.
 */
export const now = epochNow;

export async function openPeer({ url }) {
  const { TickwheelClient } = await importDist('client/index.js');
  const openedAt = performance.now();
  // No retries: a failed request is a failure of the run, counted, not hidden by a second try.
  const client = new TickwheelClient({ url, retries: 0, timeoutMs: 60_000 });
  await client.health();
  const openMs = performance.now() - openedAt;
  return {
    name: 'tickwheel-http',
    openMs,
    now,
    async schedule(messages) {
      const requests = new Array(messages.length);
      for (let i = 0; i < messages.length; i++) {
        const { payload } = messages[i];
        requests[i] = { topic: TOPIC, payload, deliverAt: payload.due };
      }
      const results = await client.scheduleMany(requests);
      return results.map((result) => result.id);
    },
    /** Calls onMessage(payload) for every delivery; acked once it returns. */
    consume(onMessage, concurrency) {
      // A short long-poll, so that close() is not held by a receive waiting for nothing.
      return client.consume(TOPIC, (message) => onMessage(message.payload), {
        concurrency,
        waitMs: 1000,
      });
    },
    async stats() {
      const stats = await client.stats();
      return {
        fireLatenessMs: stats.latenessMs,
        scheduled: stats.scheduled,
        delivered: stats.delivered,
        acked: stats.acked,
        inMemory: stats.inMemory,
      };
    },
    close: () => client.close(),
  };
}
