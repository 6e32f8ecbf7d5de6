/**
 * /healthz tells an orchestrator the truth: 503 while the queue is still opening (recovery of a
 * big data directory takes seconds), 503 once the store has stopped taking writes (fail-stop
 * after a failed log write: only a restart recovers), 200 otherwise. While the queue opens,
 * every other route answers 503 ERR_TICKWHEEL_RECOVERING with Retry-After.
 */

import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayQueue, FileStore, MemoryStore } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import type { LogIo } from '../../src/store/log/index.js';
import { injector } from './harness.js';
import { useTempDirs } from '../support/temp-dir.js';

const dataDir = useTempDirs('health');

const JSON_TYPE = { 'content-type': 'application/json' };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function track(server: TickwheelServer): TickwheelServer {
  cleanups.push(() => server.close().then(() => undefined));
  return server;
}

describe('GET /healthz', () => {
  it.each([
    ['ENOSPC', 'write'],
    ['EROFS', 'write'],
    ['EIO', 'sync'],
  ] as const)(
    'answers 503 with the reason once a failed log %s (%s) stopped the store',
    async (code, when) => {
      const disk = { failing: false };
      const fail = () => Object.assign(new Error(`${code}: simulated disk failure`), { code });
      const logIo: Partial<LogIo> = {
        async write(handle, buffer, offset, length, position) {
          if (disk.failing && when === 'write') throw fail();
          return (await handle.write(buffer, offset, length, position)).bytesWritten;
        },
        async sync(handle) {
          if (disk.failing && when === 'sync') throw fail();
          await handle.datasync();
        },
      };
      const store = await FileStore.open({ dir: dataDir(), fsync: 'batch', logIo });
      const queue = await DelayQueue.open({ store });
      cleanups.push(() => queue.close().catch(() => undefined));
      const call = injector(track(await createServer({ queue, logLevel: 'silent' })));

      expect(await call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
      disk.failing = true;
      const refused = await call('POST', '/v1/topics/t/messages', { payload: 1 });
      expect(refused.status).toBe(503);
      expect(refused.body.error.code).toBe('ERR_TICKWHEEL_IO');

      // The disk works again, but the store is fail-stop: only a restart takes writes again.
      disk.failing = false;
      const health = await call('GET', '/healthz');
      expect(health.status).toBe(503);
      expect(health.headers['content-type']).toContain('application/json');
      expect(health.body.status).toBe('stopped');
      expect(health.body.reason).toMatch(/log write failed/);
      expect(health.body.reason).toMatch(/restart/);
    },
  );

  it('is ok on a queue whose store reports no stopped flag (the memory store)', async () => {
    const queue = await DelayQueue.open({ store: new MemoryStore() });
    cleanups.push(() => queue.close());
    const call = injector(track(await createServer({ queue, logLevel: 'silent' })));
    expect(await call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
  });
});

describe('a server whose queue is still opening (openInBackground)', () => {
  async function opening() {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const queue = gate.then(() => DelayQueue.open({ store: new MemoryStore() }));
    cleanups.push(async () => {
      release();
      await (await queue).close();
    });
    const server = track(await createServer({ queue, openInBackground: true, logLevel: 'silent' }));
    return { server, call: injector(server), release };
  }

  it('answers /healthz 503 recovering, then 200 once open', async () => {
    const { server, call, release } = await opening();
    const health = await call('GET', '/healthz');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'recovering' });
    expect(health.headers['retry-after']).toMatch(/^\d+$/);

    release();
    await server.opened;
    expect(await call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
  });

  it('answers every other route 503 ERR_TICKWHEEL_RECOVERING with Retry-After', async () => {
    const { server, call, release } = await opening();
    for (const [method, url, body] of [
      ['POST', '/v1/topics/t/messages', { payload: 1 }],
      ['GET', '/v1/messages/m'],
      ['DELETE', '/v1/messages/m'],
      ['POST', '/v1/topics/t/receive', {}],
      ['GET', '/v1/stats'],
      ['GET', '/v1/dashboard'],
      ['GET', '/metrics'],
      ['GET', '/'],
      ['GET', '/nope'],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(method, url, body);
      expect(res.status, `${method} ${url}`).toBe(503);
      expect(res.body.error.code, `${method} ${url}`).toBe('ERR_TICKWHEEL_RECOVERING');
      expect(res.headers['retry-after'], `${method} ${url}`).toMatch(/^\d+$/);
    }
    expect(() => server.queue).toThrow(/opening/);

    release();
    await server.opened;
    const scheduled = await call('POST', '/v1/topics/t/messages', { payload: 1 });
    expect(scheduled.status).toBe(201);
    expect((await server.queue.stats()).scheduled).toBe(1);
  });

  it('says what a queue on a shared store is doing while it opens: connecting to it', async () => {
    // A PostgreSQL that takes connections and never answers (as one stopped with SIGSTOP).
    const sockets = new Set<Socket>();
    const silent = createNetServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const server = await createServer({
      postgres: `postgres://tickwheel@127.0.0.1:${port}/tickwheel`,
      cluster: { connectTimeoutMs: 1000 },
      openInBackground: true,
      logLevel: 'silent',
    });
    const call = injector(server);
    const health = await call('GET', '/healthz');
    expect(health.status).toBe(503);
    expect(health.body).toEqual({
      status: 'recovering',
      reason: 'the queue is connecting to PostgreSQL and joining its nodes',
    });
    const stats = await call('GET', '/v1/stats');
    expect(stats.status).toBe(503);
    expect(stats.body.error.message).toMatch(/^the queue is connecting to PostgreSQL/);
    // The store goes away: the open fails once the connect timeout is over, and the server closes.
    for (const socket of sockets) socket.destroy();
    silent.close();
    await expect(server.opened).rejects.toThrow();
    await server.close();
  });

  it('reports a queue that failed to open, on /healthz and every route', async () => {
    const failure = Object.assign(new Error('the log is unreadable'), { code: 'ERR_TICKWHEEL_IO' });
    const server = track(
      await createServer({
        queue: Promise.reject(failure),
        openInBackground: true,
        logLevel: 'silent',
      }),
    );
    await expect(server.opened).rejects.toBe(failure);
    const call = injector(server);
    const health = await call('GET', '/healthz');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'failed' });
    expect(health.body.reason).toContain('the log is unreadable');
    const res = await call('GET', '/v1/stats');
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('ERR_TICKWHEEL_IO');
  });

  it('without openInBackground, resolves only once the queue is open', async () => {
    const queue = DelayQueue.open({ store: new MemoryStore() });
    cleanups.push(async () => (await queue).close());
    const server = track(await createServer({ queue, logLevel: 'silent' }));
    expect(server.queue).toBe(await queue);
    expect(await injector(server)('GET', '/healthz')).toMatchObject({ status: 200 });
  });

  it('opens the data directory (and takes its lock) before it resolves', async () => {
    const dir = dataDir();
    const first = track(
      await createServer({ dir, fsync: 'never', openInBackground: true, logLevel: 'silent' }),
    );
    await expect(
      createServer({ dir, openInBackground: true, logLevel: 'silent' }),
    ).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_LOCKED' });
    await first.opened;
    expect(await injector(first)('GET', '/healthz', undefined, JSON_TYPE)).toMatchObject({
      status: 200,
    });
  });
});
