import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { requireBuiltCli, startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('crash');

/**
 * A 201 means durable: SIGKILL a real server while clients schedule as fast as they can,
 * restart it on the same directory, and receive every message that got a 201.
 */

/** Messages acknowledged before the kill; the producers are still at it when it comes. */
const ACKNOWLEDGED_BEFORE_KILL = 500;
const SINGLE_PRODUCERS = 24;
const BATCH_PRODUCERS = 2;
const BATCH_SIZE = 50;

const dir = tempDir();
const servers: ServerProcess[] = [];
beforeAll(() => requireBuiltCli());
afterAll(async () => {
  await Promise.all(servers.map((server) => server.kill()));
});

describe('crash safety over HTTP', () => {
  it('after SIGKILL under load, every message that got a 201 is delivered', async () => {
    const first = await startServer(['--dir', dir, '--fsync', 'batch']);
    servers.push(first);
    // No retries: a request cut by the kill must fail, not be repeated against nothing.
    const producer = new TickwheelClient({ url: first.url, retries: 0, timeoutMs: 5000 });
    const acknowledged = new Set<string>();
    let stop = false;
    let sequence = 0;
    const delay = () => Math.floor(Math.random() * 300);

    const single = async (worker: number) => {
      while (!stop) {
        const id = `s${worker}-${sequence++}`;
        try {
          await producer.schedule({ topic: 'crash', payload: { id }, id, delayMs: delay() });
          acknowledged.add(id);
        } catch {
          return; // the server is gone
        }
      }
    };
    const batched = async (worker: number) => {
      while (!stop) {
        const messages = Array.from({ length: BATCH_SIZE }, () => {
          const id = `b${worker}-${sequence++}`;
          return { topic: 'crash', payload: { id }, id, delayMs: delay() };
        });
        try {
          const results = await producer.scheduleMany(messages);
          for (const result of results) acknowledged.add(result.id);
        } catch {
          return;
        }
      }
    };
    const producers = [
      ...Array.from({ length: SINGLE_PRODUCERS }, (_, i) => single(i)),
      ...Array.from({ length: BATCH_PRODUCERS }, (_, i) => batched(i)),
    ];
    // Killed under load, once enough has been acknowledged for a loss to show.
    await waitFor(() => acknowledged.size >= ACKNOWLEDGED_BEFORE_KILL, { timeoutMs: 30_000 });
    first.child.kill('SIGKILL');
    stop = true;
    expect((await first.exited).signal).toBe('SIGKILL');
    await Promise.all(producers);
    expect(acknowledged.size).toBeGreaterThan(200);

    const second = await startServer(['--dir', dir]);
    servers.push(second);
    const consumer = new TickwheelClient({ url: second.url });
    const received = new Set<string>();
    const deadline = performance.now() + 20_000;
    while (performance.now() < deadline) {
      const missing = [...acknowledged].filter((id) => !received.has(id));
      if (missing.length === 0) break;
      const messages = await consumer.receive('crash', { max: 1000, waitMs: 500 });
      for (const message of messages) {
        expect(message.payload).toEqual({ id: message.id });
        received.add(message.id);
      }
      if (messages.length > 0) await consumer.ackMany(messages.map((m) => m.receipt));
    }
    const lost = [...acknowledged].filter((id) => !received.has(id));
    expect(lost, `lost ${lost.length} of ${acknowledged.size} acknowledged messages`).toEqual([]);
    await second.kill();
  });
});
