/**
 * The durability a cluster node keeps is decided when it opens (src/cluster/durability.ts),
 * from the replicas connected to the primaries then: the default 'auto' is 'async' on a Valkey
 * without replicas (a schedule is acknowledged at once, and the choice is said in the log and
 * in stats()) and 'replicated' on one with a replica; an explicit 'replicated' or 'fsynced'
 * where no primary has a replica is refused at open, with what to do, instead of failing every
 * write after a 5 s wait. Real valkey-server processes, `tickwheel serve` as users run it.
 */

import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { TickwheelClient } from '../../src/client/index.js';
import { DelayQueue, TickwheelNoReplicaError } from '../../src/delay-queue.js';
import type { Queue } from '../../src/queue/api.js';
import { chooseDurability } from '../../src/cluster/durability.js';
import { CLI, startServer, type ServerProcess } from '../server/process.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed, startReplicated, startServer as startValkey } from '../../scripts/valkey.mjs';

/**
 * `tickwheel serve` run until it exits, or killed after `ms` (a server that opened when it
 * should have refused to: its exit code is then null).
 */
function serveUntilExit(
  args: string[],
  ms: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('chooseDurability', () => {
  const none = [
    { primary: 'a:1', replicas: 0 },
    { primary: 'b:1', replicas: 0 },
  ];
  const some = [
    { primary: 'a:1', replicas: 1 },
    { primary: 'b:1', replicas: 0 },
  ];

  it("makes 'auto' async where no primary has a replica, replicated where one has", () => {
    expect(chooseDurability('auto', none).durability).toBe('async');
    expect(chooseDurability('auto', some).durability).toBe('replicated');
    expect(chooseDurability('auto', [{ primary: 'a:1', replicas: 2 }]).durability).toBe(
      'replicated',
    );
  });

  it("refuses 'replicated' and 'fsynced' only where no primary has a replica", () => {
    for (const asked of ['replicated', 'fsynced'] as const) {
      expect(() => chooseDurability(asked, none)).toThrow(TickwheelNoReplicaError);
      // A Cluster short of one replica for a moment keeps what was asked; the log says which.
      const kept = chooseDurability(asked, some);
      expect(kept.durability).toBe(asked);
      expect(kept.reason).toMatch(/b:1 has none now/);
    }
    expect(chooseDurability('async', none)).toEqual({ durability: 'async', reason: 'as set' });
  });
});

describe.runIf(installed('valkey-server'))('durability decided at open, on real Valkey', () => {
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  });

  it('defaults to async on a Valkey without replicas: schedules are acknowledged, and it says so', async () => {
    const valkey = await startValkey();
    cleanups.push(() => valkey.stop());
    const server: ServerProcess = await startServer(
      ['--redis', valkey.url, '--queue', 'dev', '--partitions', '4'],
      { timeoutMs: 30_000 },
    );
    cleanups.push(() => server.kill());
    expect(server.stdout()).toMatch(
      /joined as node \S+: .*; durability async \(auto: no primary has a replica \(redis:\/\/127\.0\.0\.1:\d+\)/,
    );
    const client = new TickwheelClient({ url: server.url });
    cleanups.push(() => client.close());
    const { id } = await client.schedule({ topic: 'dev', payload: 1, delayMs: 50 });
    const got = await client.receive('dev', { waitMs: 10_000 });
    expect(got.map((m) => m.id)).toEqual([id]);
    const stats = await client.stats();
    expect(stats.cluster).toMatchObject({ durability: 'async', durabilityOption: 'auto' });
    expect(stats.cluster?.durabilityReason).toMatch(/^auto: no primary has a replica/);
  }, 60_000);

  it("refuses an explicit 'replicated' at open where no primary has a replica, saying what to do", async () => {
    const valkey = await startValkey();
    cleanups.push(() => valkey.stop());
    const run = await serveUntilExit(['--redis', valkey.url, '--durability', 'replicated'], 20_000);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/ERR_TICKWHEEL_NO_REPLICA/);
    expect(run.stderr).toMatch(/use durability 'auto' \(the default\) or 'async'/);
    expect(run.stderr).toMatch(/add a replica/);

    // The library refuses the same way, with a named error.
    const opening = DelayQueue.open({ redis: valkey.url, queue: 'strict', durability: 'fsynced' });
    cleanups.push(() => opening.then((queue) => queue.close()));
    const error = await opening.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(TickwheelNoReplicaError);
    expect(error).toMatchObject({ code: 'ERR_TICKWHEEL_NO_REPLICA', durability: 'fsynced' });
  }, 60_000);

  it('makes auto replicated on a primary with a replica', async () => {
    const set = await startReplicated({ replicas: 1 });
    cleanups.push(() => set.stop());
    const queue: Queue = await DelayQueue.open({
      redis: set.primary.url,
      queue: 'kept',
      partitions: 2,
    });
    cleanups.push(() => queue.close());
    const stats = await queue.stats();
    expect(stats.cluster).toMatchObject({
      durability: 'replicated',
      durabilityOption: 'auto',
      durabilityReason: 'auto: the primaries have replicas',
    });
    // Acknowledged once the replica has it (WAIT 1 answered).
    const { id } = await queue.schedule({ topic: 'kept', payload: 1, delayMs: 60_000 });
    expect(await queue.get(id)).toMatchObject({ status: 'scheduled' });
  }, 60_000);
});
