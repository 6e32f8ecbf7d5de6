/**
 * The client's two streams keep an unfinished line (the delivery stream) or event block (GET
 * /v1/events) up to a bound: a peer that sends without ever ending one makes the stream fail
 * with ERR_TICKWHEEL_NETWORK, instead of growing the client's memory until V8 refuses a string.
 * A bare HTTP server on a socket plays that peer.
 */

import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { MAX_STREAM_LINE_CHARS } from '../../src/client/delivery-stream.js';
import { MAX_EVENT_CHARS } from '../../src/client/events.js';
import { bareServer } from '../support/bare-server.js';
import { waitFor } from '../support/wait-for.js';

const open: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of open.splice(0).reverse()) await close();
});

/** Writes `total` characters of 'x' in 64 KiB pieces, as fast as the socket takes them. */
async function endless(res: ServerResponse, total: number): Promise<void> {
  const piece = 'x'.repeat(64 * 1024);
  for (let sent = 0; sent < total && !res.destroyed; sent += piece.length) {
    if (!res.write(piece)) await new Promise((resolve) => res.once('drain', resolve));
  }
}

/** A client of a peer that starts a line (or an event) and never ends it. */
async function endlessPeer(): Promise<TickwheelClient> {
  const server = await bareServer((req, res) => {
    if (req.url?.startsWith('/v1/events')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: acked\ndata: ');
      void endless(res, MAX_EVENT_CHARS * 2);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write('{"messages":[{"id":"');
    void endless(res, MAX_STREAM_LINE_CHARS * 2);
  });
  open.push(() => server.close());
  const client = new TickwheelClient({ url: server.url });
  open.push(() => client.close());
  return client;
}

describe('stream bounds', () => {
  it('fails an event stream whose block never ends past MAX_EVENT_CHARS', async () => {
    const client = await endlessPeer();
    const drain = async () => {
      for await (const event of client.events({ topic: 't' })) void event;
    };
    await expect(drain()).rejects.toMatchObject({
      name: 'TickwheelNetworkError',
      code: 'ERR_TICKWHEEL_NETWORK',
      message: expect.stringMatching(`sent over ${MAX_EVENT_CHARS} characters`),
    });
  });

  it("fails a consumer's delivery stream whose line never ends past MAX_STREAM_LINE_CHARS", async () => {
    const client = await endlessPeer();
    const errors: unknown[] = [];
    const consumer = client.consume('t', () => {}, { onError: (err) => errors.push(err) });
    open.push(() => consumer.close());
    await waitFor(() => errors.length > 0, { timeoutMs: 60_000 });
    expect(errors[0]).toMatchObject({
      name: 'TickwheelNetworkError',
      code: 'ERR_TICKWHEEL_NETWORK',
      message: expect.stringMatching(
        `delivery stream of topic t sent over ${MAX_STREAM_LINE_CHARS} characters`,
      ),
    });
  });
});
