/**
 * A closing server ends at once the connections that serve no request: an idle keep-alive one,
 * and one whose client went away halfway through sending a request (an aborted long poll),
 * which Node does not count as idle and which held close() for up to the request timeout.
 * Requests being served still finish.
 */

import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it, vi } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { createServer } from '../../src/server/index.js';
import { waitFor } from '../support/wait-for.js';

async function start() {
  const queue = await DelayQueue.open({ store: new MemoryStore() });
  const server = await createServer({ queue, logLevel: 'silent', maxWaitMs: 2_000 });
  await server.listen({ port: 0, host: '127.0.0.1' });
  const { port } = server.server.address() as { port: number };
  return { queue, server, port };
}

describe('closing the server', () => {
  it('does not wait for a connection left with half a request', async () => {
    const { queue, server, port } = await start();
    const accepted: Socket[] = [];
    server.server.on('connection', (held: Socket) => accepted.push(held));
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    // Headers started, never finished: Node waits for the rest until the request timeout.
    socket.write('POST /v1/topics/t/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl');
    // Closed once the server has read what was sent (closed before, it would reset the socket).
    await waitFor(() => accepted.some((held) => held.bytesRead > 0));
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    await once(socket.resume(), 'close');
    await queue.close();
  });

  it('lets a long poll being served finish, then closes its connection', async () => {
    const { queue, server, port } = await start();
    const served = vi.spyOn(queue, 'receive');
    const poll = fetch(`http://127.0.0.1:${port}/v1/topics/t/receive`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ waitMs: 1_000 }),
    });
    // Closed while the poll waits in the queue.
    await waitFor(() => served.mock.calls.some(([, options]) => (options?.waitMs ?? 0) > 0));
    const closed = server.close();
    const answer = await poll;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('connection')).toBe('close');
    expect(await answer.json()).toEqual({ messages: [] });
    await closed;
    await queue.close();
  });
});
