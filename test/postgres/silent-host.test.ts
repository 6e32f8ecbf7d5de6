/**
 * A PostgreSQL host that goes silent after open (packets dropped, not refused: a dead machine,
 * a cut network) fails the driver's calls with ERR_TICKWHEEL_UNAVAILABLE instead of holding them
 * for as long as TCP keeps trying: its pool's connects and its statements' answers have a
 * bound. A TCP relay between the driver and a real PostgreSQL goes silent on demand.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresDriver } from '../../src/postgres/driver.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { startRelay } from '../../scripts/relay.mjs';
import { at } from './with-postgres.js';

describe.runIf(postgresInstalled())('PostgresDriver: a host gone silent', () => {
  let server: { port: number; url: string; stop(): Promise<void> };
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(() => server?.stop());

  it('fails a call in flight and the next one, naming PostgreSQL, rather than hanging', async () => {
    const proxy = await startRelay(server.port);
    const url = server.url.replace(`:${server.port}/`, `:${proxy.port}/`);
    const driver = await PostgresDriver.open({
      postgres: url,
      queue: 'silent',
      statementTimeoutMs: 200,
    });
    try {
      await driver.config(4, 30_000);
      expect(await driver.get(at(0, 'nothing'))).toBeUndefined();
      proxy.silence();
      // On a connection that no longer answers, and on new ones that never open.
      const calls = [driver.get(at(0, 'nothing')), driver.get(at(1, 'nothing'))];
      for (const call of calls) {
        await expect(call).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_UNAVAILABLE' });
      }
    } finally {
      proxy.close();
      await driver.close().catch(() => undefined);
    }
  }, 60_000);
});
