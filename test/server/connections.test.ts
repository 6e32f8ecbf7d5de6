/**
 * The connection cap of `tickwheel serve`: a flood of silent sockets never takes the file
 * descriptors that the store and clients that speak need. The flood test runs the built CLI
 * under a low `ulimit -n`, as an operator would meet it.
 */

import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { defaultMaxConnections, fileLimit } from '../../src/server/connections.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { startServer, type ServerProcess } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const tempDir = useTempDirs('connections');

const servers: ServerProcess[] = [];
const sockets: Socket[] = [];
const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(closers.splice(0).map((close) => close()));
  await Promise.all(servers.splice(0).map((server) => server.kill()));
});

/** Opens a TCP connection that never sends a byte; resolves once it is connected. */
function silentSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    // The server may close it to make room: that is what is tested, not an error here.
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

describe('tickwheel serve under a flood of silent connections', () => {
  it('answers a client that speaks when silent sockets outnumber its file descriptors', async () => {
    const token = 'flood-test-token';
    const server = await startServer(['--dir', tempDir(), '--token', token], { fdLimit: 512 });
    servers.push(server);
    const port = Number(new URL(server.url).port);

    const flood: Promise<Socket>[] = [];
    for (let i = 0; i < 700; i++) flood.push(silentSocket(port));
    await Promise.all(flood);

    const scheduled = await fetch(`${server.url}/v1/topics/flood/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ payload: { n: 1 }, delayMs: 60_000 }),
    });
    expect(scheduled.status).toBe(201);
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe('ok');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const shed = /^tickwheel_http_connections_closed_at_cap_total\{action="shed"\} (\d+)$/m.exec(
      metrics,
    );
    expect(Number(shed?.[1])).toBeGreaterThan(0);
  }, 60_000);
});

/** A server with a cap of `maxConnections`, and the number of connections it has accepted. */
async function cappedServer(maxConnections: number) {
  const queue = await DelayQueue.open({ store: new MemoryStore() });
  const server: TickwheelServer = await createServer({
    queue,
    logLevel: 'silent',
    maxConnections,
  });
  await server.listen({ port: 0, host: '127.0.0.1' });
  closers.push(async () => {
    await server.close();
    await queue.close();
  });
  const counts = { accepted: 0, requests: 0, answered: 0 };
  server.server.on('connection', () => (counts.accepted += 1));
  server.server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    counts.requests += 1;
    response.once('close', () => (counts.answered += 1));
  });
  const { port } = server.server.address() as { port: number };

  /** A connection the server has accepted, closed or not. */
  const open = async () => {
    const before = counts.accepted;
    const socket = await silentSocket(port);
    let closed = false;
    socket.once('close', () => (closed = true));
    await waitFor(() => counts.accepted > before);
    return { socket, closed: () => closed };
  };
  /** Sends a request on the connection and waits until the server has received it. */
  const send = async (socket: Socket, request: string) => {
    const before = counts.requests;
    socket.write(request);
    await waitFor(() => counts.requests > before);
  };
  return { server, open, send, counts };
}

const LONG_POLL =
  'POST /v1/topics/t/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
  'Content-Length: 16\r\n\r\n{"waitMs":20000}';

/** A server capped at one connection, held by a long poll. */
async function fullOfLongPoll() {
  const capped = await cappedServer(1);
  const poll = await capped.open();
  await capped.send(poll.socket, LONG_POLL);
  return { ...capped, poll };
}

describe('the connection cap', () => {
  it('closes the connection that has waited longest without a whole request', async () => {
    const { open, send, counts } = await cappedServer(3);
    const a = await open();
    const poll = await open();
    await send(poll.socket, LONG_POLL);
    const b = await open();

    const c = await open(); // one over the cap: a goes, the oldest silent one
    await waitFor(a.closed);
    const d = await open(); // the long poll is older than b, but its request is whole: b goes
    await waitFor(b.closed);
    expect([poll.closed(), c.closed(), d.closed()]).toEqual([false, false, false]);

    // c is answered, then waits for its next request behind d, which has waited since it opened.
    const answered = once(c.socket, 'data');
    await send(c.socket, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    expect(String((await answered)[0])).toMatch(/^HTTP\/1\.1 200 /);
    await waitFor(() => counts.answered === 1);
    const e = await open();
    await waitFor(d.closed);
    expect([poll.closed(), c.closed(), e.closed()]).toEqual([false, false, false]);
  });

  it('closes a connection still sending its request before one being answered', async () => {
    const { open, send } = await cappedServer(2);
    const poll = await open();
    await send(poll.socket, LONG_POLL);
    const slow = await open();
    // Headers whole, body not: the request has not arrived until its last byte has.
    await send(
      slow.socket,
      'POST /v1/topics/t/receive HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Content-Length: 16\r\n\r\n{"wait',
    );
    const next = await open();
    await waitFor(slow.closed);
    expect([poll.closed(), next.closed()]).toEqual([false, false]);
  });

  it('answers a health check past the cap, and refuses anything else there with 503', async () => {
    const { server, open, poll } = await fullOfLongPoll();
    const probe = await open();
    const healthy = once(probe.socket, 'data');
    probe.socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    const health = String((await healthy)[0]);
    expect(health).toMatch(/^HTTP\/1\.1 200 /);
    expect(health).toMatch(/\r\nconnection: close\r\n/i);
    await waitFor(probe.closed);
    const writer = await open();
    const answered = once(writer.socket, 'data');
    const body = '{"payload":1}';
    writer.socket.write(
      'POST /v1/topics/t/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    );
    const text = String((await answered)[0]);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: 'ERR_TICKWHEEL_CAPACITY', outcome: 'none' },
    });
    expect((await server.queue.stats()).scheduled).toBe(0);
    expect(poll.closed()).toBe(false);
  });

  it('refuses a connection past the cap whose request has not arrived whole in 2 s', async () => {
    const { open, poll } = await fullOfLongPoll();
    const dribbler = await open();
    const answer = once(dribbler.socket, 'data');
    dribbler.socket.write('G');
    await waitFor(dribbler.closed);
    expect(String((await answer)[0])).toMatch(/^HTTP\/1\.1 503 /);
    expect(poll.closed()).toBe(false);
  });

  it('does not wait, when closing, for a connection past the cap that has sent part of a request', async () => {
    const { server, open } = await fullOfLongPoll();
    const dribbler = await open();
    dribbler.socket.write('G');
    await server.close();
    await waitFor(dribbler.closed);
  });

  it('lets at most 8 connections past the cap at once; the next is refused at once', async () => {
    const { open, poll } = await fullOfLongPoll();
    const probes = [];
    for (let i = 0; i < 8; i++) probes.push(await open());
    const refused = await open();
    const answer = once(refused.socket, 'data');
    await waitFor(refused.closed);
    expect(String((await answer)[0])).toMatch(/^HTTP\/1\.1 503 /);
    expect(probes.map((probe) => probe.closed())).toEqual(Array(8).fill(false));
    expect(poll.closed()).toBe(false);
  });

  it('refuses with 503 a connection past the cap that sends nothing, when every other one is being answered', async () => {
    const { open, poll } = await fullOfLongPoll();
    const refused = await open();
    const answer = once(refused.socket, 'data');
    await waitFor(refused.closed);
    const text = String((await answer)[0]);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text).toMatch(/\r\nRetry-After: 1\r\n/i);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: 'ERR_TICKWHEEL_CAPACITY', outcome: 'none' },
    });
    expect(poll.closed()).toBe(false);
  });
});

describe('the default connection cap', () => {
  it('leaves a quarter of the file limit, at least 128, to the store, between 16 and 4096', () => {
    expect(defaultMaxConnections(512)).toBe(384);
    expect(defaultMaxConnections(1024)).toBe(768);
    expect(defaultMaxConnections(100)).toBe(16);
    expect(defaultMaxConnections(1_048_576)).toBe(4096);
    expect(defaultMaxConnections(Number.POSITIVE_INFINITY)).toBe(4096);
  });

  it('reads the soft file limit of the process', () => {
    if (process.platform !== 'linux') return;
    expect(fileLimit()).toBeGreaterThan(0);
    expect(fileLimit('/nonexistent/limits')).toBeUndefined();
  });
});
