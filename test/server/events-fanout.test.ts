/**
 * GET /v1/events with many readers that keep up: the kernel takes every write at once, so a
 * stream's loop never waits for I/O. The streams share turns of the event loop, so that a burst
 * of events fanned out to every reader does not keep the server from answering anything else.
 */

import { get, type IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.js';
import { listeningServer } from './harness.js';

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const READERS = 40;
const EVENTS = 5000;

/** Opens an event stream; `count()` is how many `scheduled` events it has read. */
function reader(port: number): Promise<{ count: () => number }> {
  return new Promise((resolve, reject) => {
    const request = get({ host: '127.0.0.1', port, path: '/v1/events?types=scheduled' });
    request.once('error', reject);
    request.once('response', (response: IncomingMessage) => {
      closers.push(async () => void response.destroy());
      let count = 0;
      let carry = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        const text = carry + chunk;
        count += text.split('event: scheduled\n').length - 1;
        carry = text.slice(-20);
        // The carry is counted again only if it holds a whole marker: drop one that it does.
        if (carry.includes('event: scheduled\n')) carry = carry.slice(carry.lastIndexOf('\n') + 1);
      });
      response.on('error', () => undefined);
      resolve({ count: () => count });
    });
  });
}

describe('GET /v1/events fanned out to many readers', () => {
  it('gives the event loop turns while it writes a burst to every reader', async () => {
    const { queue, port } = await listeningServer();
    const readers = await Promise.all(Array.from({ length: READERS }, () => reader(port)));

    let longestGap = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGap = Math.max(longestGap, now - last);
      last = now;
    }, 5);
    try {
      await queue.scheduleMany(
        Array.from({ length: EVENTS }, (_, i) => ({ topic: 'burst', payload: i, delayMs: 60_000 })),
      );
      last = performance.now();
      longestGap = 0;
      await waitFor(() => readers.every((r) => r.count() === EVENTS), { timeoutMs: 60_000 });
    } finally {
      clearInterval(ticker);
    }
    // Written in one go, the burst held the loop for seconds; in shared turns, a few of 10 ms.
    expect(longestGap).toBeLessThan(400);
  }, 90_000);
});
