/**
 * Requests pipelined on one connection: Node starts each as it arrives, and a long poll writes
 * nothing until it ends, so without a bound one socket could hold any number of long polls (and
 * the memory of each). Past MAX_UNANSWERED, a request is answered 503 without its route running.
 */

import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_UNANSWERED } from '../../src/server/connections.js';
import { waitFor } from '../support/wait-for.js';
import { listeningServer } from './harness.js';

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function post(path: string, body: string): string {
  return (
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
}

/** A connection and everything the server has written to it so far. */
async function connection(port: number): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect(port, '127.0.0.1');
  closers.push(async () => void socket.destroy());
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, received: () => text };
}

function statuses(text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));
}

describe('requests pipelined on one connection', () => {
  it(`runs at most ${MAX_UNANSWERED} unanswered at once; the others get 503 ERR_TICKWHEEL_CAPACITY`, async () => {
    const { queue, port } = await listeningServer();
    const { socket, received } = await connection(port);
    const extra = 8;
    const longPoll = post('/v1/topics/piped/receive', '{"waitMs":1500}');
    socket.write(longPoll.repeat(MAX_UNANSWERED + extra));

    await waitFor(() => statuses(received()).length === MAX_UNANSWERED + extra, {
      timeoutMs: 10_000,
    });
    const answered = statuses(received());
    expect(answered.slice(0, MAX_UNANSWERED)).toEqual(Array(MAX_UNANSWERED).fill(200));
    expect(answered.slice(MAX_UNANSWERED)).toEqual(Array(extra).fill(503));
    const text = received();
    const refusal = text.slice(text.lastIndexOf('HTTP/1.1 503 '));
    expect(refusal).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(refusal).toContain('"code":"ERR_TICKWHEEL_CAPACITY"');
    expect(refusal).toContain('"outcome":"none"');

    // The connection is still served once its answers are out; a refused request did nothing.
    const before = text.length;
    socket.write(post('/v1/topics/piped/messages', '{"payload":1}'));
    await waitFor(() => statuses(received().slice(before)).length === 1);
    expect(statuses(received().slice(before))).toEqual([201]);
    expect((await queue.stats()).scheduled).toBe(1);
  }, 20_000);

  it('refuses a schedule pipelined behind too many long polls, and schedules nothing', async () => {
    const { queue, port } = await listeningServer();
    const { socket, received } = await connection(port);
    const longPoll = post('/v1/topics/piped/receive', '{"waitMs":1000}');
    const schedule = post('/v1/topics/other/messages', '{"payload":1}');
    socket.write(longPoll.repeat(MAX_UNANSWERED) + schedule);
    await waitFor(() => statuses(received()).length === MAX_UNANSWERED + 1, { timeoutMs: 10_000 });
    expect(statuses(received()).at(-1)).toBe(503);
    expect((await queue.stats()).scheduled).toBe(0);
  }, 20_000);
});
