import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseKeeper, LeaseLostError, SystemClock, type LeaseOptions } from '../../src/index.js';
import { sleep, waitFor } from '../support/wait-for.js';

/**
 * The lease keeper against a real Redis lock: SET key token NX PX to acquire, a token-checked
 * PEXPIRE to renew and a token-checked DEL to release (the lock of the Redis docs and of
 * Redisson). The test starts its own redis-server on a free loopback port and stops it.
 */

const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
else
  return 0
end`;
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
else
  return 0
end`;

const installed = spawnSync('redis-server', ['--version']).status === 0;
if (!installed) {
  console.warn(
    'redis-server is not installed: skipping the real Redis lock tests ' +
      '(apt-get install -y redis-server; CI installs it)',
  );
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  probe.close();
  await once(probe, 'close');
  return port;
}

describe.skipIf(!installed)('LeaseKeeper with a real Redis lock', () => {
  let server: ChildProcess;
  let port: number;
  const clients: Redis[] = [];
  const connect = () => {
    const client = new Redis(port, '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 1 });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    port = await freePort();
    server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    await new Promise<void>((resolve, reject) => {
      server.stdout!.on('data', (chunk: Buffer) => {
        output += chunk;
        if (output.includes('Ready to accept connections')) resolve();
      });
      server.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
    });
  });

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    if (server !== undefined && server.exitCode === null) {
      server.kill('SIGTERM');
      await once(server, 'exit');
    }
  });

  /** Acquires `key` for `leaseMs` and keeps it with a LeaseKeeper; null if someone holds it. */
  async function lock(
    redis: Redis,
    key: string,
    leaseMs: number,
    options: Partial<LeaseOptions<string>> = {},
  ) {
    const token = `${process.pid}-${Math.random().toString(36).slice(2)}`;
    if ((await redis.set(key, token, 'PX', leaseMs, 'NX')) !== 'OK') return null;
    const keeper = new LeaseKeeper({ clock: new SystemClock() });
    const lease = keeper.hold<string>({
      leaseMs,
      data: token,
      renew: async () => (await redis.eval(RENEW, 1, key, token, leaseMs)) === 1,
      release: () => redis.eval(RELEASE, 1, key, token),
      ...options,
    });
    return { lease, keeper, token };
  }

  it('keeps the lock well past its lease while held, and frees it on release', async () => {
    const redis = connect();
    const rival = connect();
    const held = await lock(redis, 'lock:job', 600);
    expect(held).not.toBeNull();
    const { lease, keeper, token } = held!;
    // Hold it for three leases (renewed every 200 ms); the lock must never lapse or change hands.
    while (lease.renewals < 9) {
      expect(await rival.set('lock:job', 'rival', 'PX', 600, 'NX')).toBeNull();
      expect(await rival.get('lock:job')).toBe(token);
      expect(await rival.pttl('lock:job')).toBeGreaterThan(0);
      await sleep(25);
    }
    expect(lease.state).toBe('held');
    await lease.release();
    expect(await rival.exists('lock:job')).toBe(0);
    expect(await rival.set('lock:job', 'rival', 'PX', 600, 'NX')).toBe('OK');
    keeper.close();
  });

  it('tells the holder, through onLost and the signal, when the lock changed hands', async () => {
    const redis = connect();
    const admin = connect();
    const lost: LeaseLostError[] = [];
    const held = await lock(redis, 'lock:stolen', 600, { onLost: (err) => lost.push(err) });
    const { lease, keeper } = held!;
    const aborted = once(lease.signal, 'abort');
    // Held and renewed once ...
    await waitFor(() => lease.renewals >= 1);
    // ... when someone else takes the lock (as if ours had lapsed during a long pause).
    await admin.set('lock:stolen', 'thief', 'PX', 5_000);
    const started = performance.now();
    await aborted;
    const took = performance.now() - started;
    expect(took).toBeLessThan(2_000); // within a renewal period (200 ms), generously
    expect(lease.state).toBe('lost');
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({
      code: 'ERR_TICKWHEEL_LEASE_LOST',
      message: expect.stringContaining('answered false'),
    });
    expect(lease.signal.reason).toBe(lost[0]);
    // The token-checked release leaves the thief's lock alone.
    await lease.release();
    expect(await admin.get('lock:stolen')).toBe('thief');
    keeper.close();
  });

  it('loses the lease when a renewal hangs, before the lock can lapse', async () => {
    const redis = connect();
    const admin = connect();
    const held = await lock(redis, 'lock:paused', 1_200);
    const { lease, keeper } = held!;
    const aborted = once(lease.signal, 'abort');
    await waitFor(() => lease.renewals >= 1);
    // Redis stops answering writes: the next renewal (a token-checked PEXPIRE) hangs.
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    try {
      await aborted;
      expect(lease.state).toBe('lost');
      const reason = lease.signal.reason as LeaseLostError;
      expect(reason.cause).toMatchObject({ code: 'ERR_TICKWHEEL_TIMEOUT' });
      // Told while the lock was still ours: it only lapses 1200 ms after the last renewal.
      expect(performance.now()).toBeLessThan(lease.validUntil);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    keeper.close();
  });
});
