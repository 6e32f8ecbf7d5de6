/**
 * The second connection a standalone server's subscriptions take (src/valkey/connection.ts),
 * refused by a real server at its maxclients limit: subscribe() fails, the refused connection is
 * not kept (a later subscribe() connects anew), and close() closes the main connection still;
 * a subscriber the server drops after it subscribed connects again and hears what comes after.
 */

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from '../../src/valkey/connection.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startServer } from '../../scripts/valkey.mjs';
import { waitFor } from '../support/wait-for.js';

describe.runIf(installed('valkey-server'))("a standalone connection's subscriber", () => {
  let server: { url: string; stop(): Promise<void> };
  let admin: Valkey;

  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
    admin = await Valkey.connect(server.url);
  }, 30_000);

  afterEach(async () => {
    await admin.command('k', ['CONFIG', 'SET', 'maxclients', '10000']);
  });

  afterAll(async () => {
    await admin?.close();
    await server?.stop();
  });

  const clients = async (): Promise<number> => {
    const info = String(await admin.command('k', ['INFO', 'clients']));
    return Number(/^connected_clients:(\d+)/m.exec(info)?.[1]);
  };

  /** A connection whose subscriber the server refuses: no room left for another client. */
  const refusedSubscriber = async (): Promise<Valkey> => {
    const valkey = await Valkey.connect(server.url);
    valkey.commandTimeoutMs = 500;
    await waitFor(async () => (await clients()) === 2);
    await admin.command('k', ['CONFIG', 'SET', 'maxclients', '2']);
    await expect(valkey.subscribe('{p}events', () => {})).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_UNAVAILABLE',
    });
    return valkey;
  };

  it('close() closes the main connection while the subscriber is refused', async () => {
    const valkey = await refusedSubscriber();
    const closing = valkey.close();
    await waitFor(async () => (await clients()) === 1, { what: 'the main connection closed' });
    await closing;
  });

  it('subscribes once the server takes clients again, and hears what is published', async () => {
    const valkey = await refusedSubscriber();
    try {
      await admin.command('k', ['CONFIG', 'SET', 'maxclients', '10000']);
      valkey.commandTimeoutMs = 10_000;
      const heard: string[] = [];
      const stop = await valkey.subscribe('{p}events', (message) => heard.push(message));
      await admin.command('{p}events', ['SPUBLISH', '{p}events', 'n']);
      await waitFor(() => heard.length === 1);
      expect(heard).toEqual(['n']);
      await stop();
    } finally {
      await valkey.close();
    }
  });

  it('hears what is published after the server dropped its subscriber connection', async () => {
    const valkey = await Valkey.connect(server.url);
    try {
      const heard: string[] = [];
      const stop = await valkey.subscribe('{p}events', (message) => heard.push(message));
      await admin.command('{p}events', ['SPUBLISH', '{p}events', 'before']);
      await waitFor(() => heard.length === 1);
      const killed = await admin.command('k', ['CLIENT', 'KILL', 'TYPE', 'pubsub']);
      expect(Number(killed)).toBe(1);
      // Published until the subscriber is back: what came while it was away is not heard again.
      await waitFor(
        async () => {
          await admin.command('{p}events', ['SPUBLISH', '{p}events', 'after']);
          return heard.includes('after');
        },
        { what: 'a message heard after the reconnect', intervalMs: 100 },
      );
      expect(heard[0]).toBe('before');
      await stop();
    } finally {
      await valkey.close();
    }
  });
});
