// A Redis lock with a watchdog: the lock is taken with a 600 ms lease (SET key token NX PX), and
// a LeaseKeeper renews it every 200 ms while the work runs for two seconds, with
// token-checked Lua scripts so that only the holder can renew or release it. If the lock is
// lost, lease.signal aborts and the work stops.
//
// Uses REDIS_URL if set; otherwise starts its own redis-server on a free loopback port.
// Run: npm run build && node examples/redis-lock.mjs

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { LeaseKeeper } from 'tickwheel';

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

const keeper = new LeaseKeeper();

/** Takes `key` for `leaseMs` and keeps it until released; null when someone else holds it. */
async function lock(redis, key, leaseMs, name) {
  const token = `${name}-${Math.random().toString(36).slice(2)}`;
  if ((await redis.set(key, token, 'PX', leaseMs, 'NX')) !== 'OK') return null;
  return keeper.hold({
    leaseMs,
    renew: async () => (await redis.eval(RENEW, 1, key, token, leaseMs)) === 1,
    release: () => redis.eval(RELEASE, 1, key, token),
    onLost: (err) => console.log(`${name}: ${err.message}`),
  });
}

/** Work that takes `ms` in 20 ms steps and stops as soon as the lock is lost. */
async function work(ms, signal) {
  for (let done = 0; done < ms; done += 20) {
    await sleep(20, undefined, { signal });
  }
}

const { url, stop } = await redisServer();
const redis = new Redis(url);

const first = await lock(redis, 'lock:report', 600, 'worker 1');
console.log(`worker 1: ${first ? 'got the lock' : 'lock busy'}`);
console.log(
  `worker 2: ${(await lock(redis, 'lock:report', 600, 'worker 2')) ? 'got the lock' : 'lock busy'}`,
);
await work(2_000, first.signal);
console.log(`worker 1: done after 2000 ms, the 600 ms lease renewed ${first.renewals} times`);
await first.release();
console.log('worker 1: released');

const second = await lock(redis, 'lock:report', 600, 'worker 2');
console.log(`worker 2: ${second ? 'got the lock' : 'lock busy'}`);
setTimeout(() => redis.set('lock:report', 'intruder', 'PX', 2_000), 150); // it changes hands
try {
  await work(2_000, second.signal);
} catch {
  console.log('worker 2: stopped its work');
}

keeper.close();
await redis.del('lock:report');
redis.disconnect();
await stop();

/** REDIS_URL, or a redis-server of our own on a free loopback port. */
async function redisServer() {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: async () => {} };
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address();
  probe.close();
  const server = spawn(
    'redis-server',
    ['--port', `${port}`, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  process.on('exit', () => server.kill());
  await new Promise((resolve, reject) => {
    let output = '';
    server.on('error', (err) =>
      reject(new Error(`cannot start redis-server (${err.code}): install it or set REDIS_URL`)),
    );
    server.stdout.on('data', (chunk) => {
      output += chunk;
      if (output.includes('Ready to accept connections')) resolve();
    });
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      server.kill();
      await once(server, 'exit');
    },
  };
}
