/**
 * An `onError` that throws does not take the process down: the error it was given and its own
 * failure go to onFault (ERR_TICKWHEEL_LISTENER_FAILED), as an onFault that throws goes to
 * process warnings. A plain `node` process whose queue's connections are terminated under it.
 */

import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
import { runNodeScript } from '../support/node-script.js';

const DIST = fileURLToPath(new URL('../../dist/delay-queue.js', import.meta.url));

describe.runIf(postgresInstalled())('a queue on PostgreSQL whose onError throws', () => {
  let server: { url: string; stop(): Promise<void> };
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(() => server?.stop());

  it.each([
    ['throws', "() => { throw new Error('a bug in onError'); }"],
    ['rejects', "async () => { throw new Error('a bug in onError'); }"],
  ])(
    'whose onError %s: reports both to onFault and goes on serving',
    async (kind, onError) => {
      const script = `
      import pg from 'pg';
      const { DelayQueue } = await import(${JSON.stringify(DIST)});
      const faults = [];
      const queue = await DelayQueue.open({
        postgres: ${JSON.stringify(server.url)},
        queue: '${kind}',
        partitions: 2,
        leaseMs: 1_000,
        onError: ${onError},
        onFault: (fault) => faults.push(fault.code + ' ' + fault.message),
      });
      const polled = queue.receive('t', { waitMs: 2_000 }).catch(() => []);
      const admin = new pg.Pool({ connectionString: ${JSON.stringify(server.url)}, max: 1 });
      const deadline = Date.now() + 30_000;
      while (!faults.some((f) => f.startsWith('ERR_TICKWHEEL_LISTENER_FAILED'))) {
        if (Date.now() > deadline) throw new Error('no fault: ' + JSON.stringify(faults));
        await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity ' +
            'WHERE pid <> pg_backend_pid() AND datname = current_database()',
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      await polled;
      await admin.end();
      // Still serving: a message scheduled now is received.
      await queue.schedule({ topic: 'u', payload: 1 });
      let got = [];
      while (got.length === 0 && Date.now() < deadline) got = await queue.receive('u', { waitMs: 1_000 }).catch(() => []);
      await queue.close();
      console.log(JSON.stringify({ received: got.length, faults: faults.slice(0, 4) }));
    `;
      const run = await runNodeScript(script, 90_000);
      expect(run.status, run.stderr).toBe(0);
      const result = JSON.parse(run.out.split('\n').pop() as string);
      expect(result.received).toBe(1);
      expect(result.faults.join('\n')).toContain(
        'ERR_TICKWHEEL_LISTENER_FAILED onError threw: a bug in onError',
      );
    },
    120_000,
  );
});
