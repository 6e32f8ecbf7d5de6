import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { TickwheelClient, TickwheelHttpError } from '../../src/client/index.js';
import { runCli, useServers } from './process.js';
import { useTempDirs } from '../support/temp-dir.js';
import { waitFor } from '../support/wait-for.js';

const dataDir = useTempDirs('e2e');

/** `tickwheel serve` as a real process, over real sockets. */

const serve = useServers();

describe('tickwheel serve', () => {
  it('serves the client over a real socket, loopback only without a token', async () => {
    const server = await serve(['--dir', dataDir()]);
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(server.stdout()).toContain('no token: listening on 127.0.0.1 only');

    const client = new TickwheelClient({ url: server.url });
    expect(await client.health()).toEqual({ status: 'ok' });
    const { id } = await client.schedule({ topic: 'e2e', payload: { n: 1 }, delayMs: 50 });
    const bytes = Buffer.from('raw bytes');
    await client.schedule({ topic: 'e2e', payload: bytes, delayMs: 50 });
    const seen: unknown[] = [];
    await new Promise<void>((resolve) => {
      const consumer = client.consume(
        'e2e',
        (message) => {
          seen.push(message.payload);
          if (seen.length === 2) void consumer.close().then(resolve);
        },
        { concurrency: 2 },
      );
    });
    expect(seen).toEqual([{ n: 1 }, bytes]);
    expect((await client.get(id))?.status).toBe('acked');
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(/^tickwheel_messages_acked_total 2$/m);
  });

  it('answers path tricks on the wire with 4xx', async () => {
    const server = await serve(['--dir', dataDir()]);
    for (const path of [
      '/v1/topics/%2e%2e/messages',
      '/v1/topics/..%2f..%2fetc/messages',
      '/v1/topics/%2E%2E%2F%2E%2E/dead',
      '/v1/messages/..%2F..%2Fpasswd',
    ]) {
      const res = await fetch(server.url + path, {
        method: path.endsWith('messages') ? 'POST' : 'GET',
        headers: { 'content-type': 'application/json' },
        ...(path.endsWith('messages') ? { body: '{"payload":1}' } : {}),
      });
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.status, path).toBeLessThan(500);
      expect(((await res.json()) as { error: { code: string } }).error.code).toMatch(
        /^ERR_TICKWHEEL_/,
      );
    }
  });

  it('with --token, /v1 needs it and the server binds all interfaces', async () => {
    const server = await serve(['--dir', dataDir(), '--token', 'tok-123']);
    expect(server.stdout()).toMatch(/listening on http:\/\/0\.0\.0\.0:/);
    expect(server.stdout()).toContain('token required');
    const anonymous = new TickwheelClient({ url: server.url });
    await expect(anonymous.stats()).rejects.toMatchObject({
      status: 401,
      code: 'ERR_TICKWHEEL_UNAUTHORIZED',
    });
    await expect(
      new TickwheelClient({ url: server.url, token: 'tok-12' }).stats(),
    ).rejects.toBeInstanceOf(TickwheelHttpError);
    const client = new TickwheelClient({ url: server.url, token: 'tok-123' });
    expect(await client.stats()).toHaveProperty('scheduled', 0);
    expect(await anonymous.health()).toEqual({ status: 'ok' });
  });

  it('reads its flags from TICKWHEEL_* variables', async () => {
    const dir = dataDir();
    const server = await serve([], {
      env: {
        TICKWHEEL_DIR: dir,
        TICKWHEEL_TOKEN: 'from-env',
        TICKWHEEL_HOST: '127.0.0.1',
        TICKWHEEL_FSYNC: 'never',
      },
    });
    expect(server.stdout()).toContain(`data in ${dir};`);
    expect(server.stdout()).toContain('"fsync":"never"');
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
    const client = new TickwheelClient({ url: server.url, token: 'from-env' });
    expect(await client.stats()).toHaveProperty('scheduled', 0);
  });

  it('refuses to open a data directory another server holds', async () => {
    const dir = dataDir();
    const first = await serve(['--dir', dir]);
    const second = await runCli(['serve', '--dir', dir, '--port', '0']);
    expect(second.code).toBe(1);
    expect(second.stderr).toContain(`in use by process ${first.child.pid}`);
    expect(second.stderr).toContain('ERR_TICKWHEEL_LOCKED');
  });

  it('on SIGTERM finishes requests in flight, ends long polls, flushes, exits 0', async () => {
    const dir = dataDir();
    const server = await serve(['--dir', dir]);
    const client = new TickwheelClient({ url: server.url, retries: 0 });
    const started = performance.now();
    const poll = client.receive('idle', { waitMs: 15_000 });
    await client.schedule({ topic: 'kept', payload: 0, id: 'before', delayMs: 60_000 });
    const schedules = Array.from({ length: 200 }, (_, i) =>
      client.schedule({ topic: 'kept', payload: i, id: `during-${i}`, delayMs: 60_000 }).then(
        () => `during-${i}`,
        (err: unknown) => err as Error,
      ),
    );
    // Signal once the server is busy with them: some are mid-write when it comes.
    await Promise.race(schedules);
    server.child.kill('SIGTERM');
    expect(await poll).toEqual([]);
    // Ended by the shutdown, not by its 15 s running out.
    expect(performance.now() - started).toBeLessThan(15_000);
    const outcomes = await Promise.all(schedules);
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout()).toContain('shutting down');
    expect(server.stdout()).toContain('"msg":"stopped"');

    const durable = outcomes.filter((outcome): outcome is string => typeof outcome === 'string');
    for (const outcome of outcomes) {
      if (typeof outcome === 'string') continue;
      // Refused, not lost: a 503 while closing, or no connection once closed.
      expect(['ERR_TICKWHEEL_SHUTTING_DOWN', 'ERR_TICKWHEEL_NETWORK']).toContain(
        (outcome as { code?: string }).code,
      );
    }
    const restarted = await serve(['--dir', dir]);
    const after = new TickwheelClient({ url: restarted.url });
    expect((await after.get('before'))?.status).toBe('scheduled');
    for (const id of durable) expect((await after.get(id))?.status, id).toBe('scheduled');
  });

  it('writes its last log lines before it exits, even to a reader that lags', async () => {
    const server = await serve(['--dir', dataDir()]);
    const client = new TickwheelClient({ url: server.url, retries: 0 });
    // The reader stops: a pipe of request lines fills up and the server holds the rest in memory.
    server.child.stdout?.pause();
    for (let from = 0; from < 1500; from += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, i) => client.schedule({ topic: 't', payload: from + i })),
      );
    }
    server.child.kill('SIGTERM');
    server.child.stdout?.resume();
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.stdout().match(/"msg":"request completed"/g)).toHaveLength(1500);
    expect(server.stdout()).toContain('shutting down');
    expect(server.stdout()).toContain('"msg":"stopped"');
  });

  it('exits at once on a second signal while a request holds up shutdown', async () => {
    // Logging requests as they arrive, so that the test sees when the held one has.
    const server = await serve(['--dir', dataDir(), '--log-level', 'debug']);
    const { port } = new URL(server.url);
    // A request whose body never finishes arriving keeps the graceful close waiting.
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      'POST /v1/topics/t/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\n\r\n{"payload":',
    );
    socket.on('error', () => undefined);
    // Its headers were read: it is a request being served, not an idle connection.
    await waitFor(() => /"url":"\/v1\/topics\/t\/messages"/.test(server.stdout()));
    server.child.kill('SIGTERM');
    // The close is under way (it has stopped accepting connections) ...
    // (The operator's lines are JSON log lines on stdout.)
    const said = () => `${server.stdout()}${server.stderr()}`;
    await waitFor(() => said().includes('SIGTERM, shutting down'));
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          const probe = connect(Number(port), '127.0.0.1');
          probe.once('connect', () => resolve(false)).once('error', () => resolve(true));
          probe.once('connect', () => probe.destroy());
        }),
    );
    // ... and from then on, a while of it does not end the process.
    const early = await Promise.race([
      server.exited.then(() => 'exited'),
      new Promise((resolve) => setTimeout(() => resolve('waiting'), 500)),
    ]);
    expect(early).toBe('waiting');
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(1);
    expect(said()).toContain('again, exiting now');
    // Exiting without a clean close is logged as an error.
    expect(said()).toMatch(/"level":50,[^\n]*"msg":"SIGTERM again, exiting now"/);
    socket.destroy();
  });
});
