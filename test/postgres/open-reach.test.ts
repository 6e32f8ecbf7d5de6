/**
 * DelayQueue.open({ postgres }) on a PostgreSQL that is not there: it keeps trying until
 * connectTimeoutMs, then rejects with ERR_TICKWHEEL_UNAVAILABLE naming the server, its password
 * starred; a connectTimeoutMs or fireIntervalMs out of range is refused before any connection. A refusal that
 * waiting does not cure (a wrong password, a database that does not exist) ends the open at once
 * with ERR_TICKWHEEL_INVALID_STATE, long before the connect timeout.
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, startPostgres } from '../../scripts/postgres.mjs';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { freePort } from '../../scripts/valkey.mjs';

describe('DelayQueue.open({ postgres }) and an absent PostgreSQL', () => {
  it('gives up after connectTimeoutMs with ERR_TICKWHEEL_UNAVAILABLE, password hidden', async () => {
    const port = (await freePort()) as number;
    const opening = DelayQueue.open({
      postgres: `postgres://app:hunter2@127.0.0.1:${port}/app`,
      connectTimeoutMs: 300,
    });
    const err = (await opening.catch((e: unknown) => e)) as Error & { code?: string };
    expect(err.code).toBe('ERR_TICKWHEEL_UNAVAILABLE');
    expect(err.message).toContain(
      `could not reach PostgreSQL at postgres://app:***@127.0.0.1:${port}/app ` +
        '(kept trying for 300 ms, the connect timeout)',
    );
    expect(err.message).not.toContain('hunter2');
  });

  it('refuses at once a connection string pg would misread: another scheme, not a URL, empty', async () => {
    for (const postgres of [
      'mysql://app:hunter2@127.0.0.1:5432/app',
      'http://127.0.0.1:5432/app',
      'postgress://127.0.0.1/app',
      'not a url',
      '',
    ]) {
      const err = (await DelayQueue.open({ postgres, connectTimeoutMs: 60_000 }).catch(
        (e: unknown) => e,
      )) as Error & { code?: string };
      expect(err.code, postgres).toBe('ERR_TICKWHEEL_INVALID_OPTION');
      expect(err.message).toMatch(/postgres must be a postgres:\/\/ or postgresql:\/\//);
      expect(err.message).not.toContain('hunter2');
    }
  });

  it("tries a pool of the application's as it is, and names it", async () => {
    const port = (await freePort()) as number;
    const pool = new pg.Pool({ connectionString: `postgres://127.0.0.1:${port}/app` });
    try {
      const err = (await DelayQueue.open({ postgres: pool, connectTimeoutMs: 300 }).catch(
        (e: unknown) => e,
      )) as Error & { code?: string };
      expect(err.code).toBe('ERR_TICKWHEEL_UNAVAILABLE');
      expect(err.message).toContain('could not reach PostgreSQL at the pg.Pool given');
    } finally {
      await pool.end();
    }
  });

  it.each([0, -1, 600_001, Number.NaN])('refuses connectTimeoutMs %s', async (ms) => {
    const opening = DelayQueue.open({
      postgres: 'postgres://127.0.0.1:1/app',
      connectTimeoutMs: ms,
    });
    await expect(opening).rejects.toMatchObject({ code: 'ERR_TICKWHEEL_INVALID_OPTION' });
  });

  it.each([-1, 1_001, Number.NaN, '5'])('refuses fireIntervalMs %s', async (ms) => {
    const opening = DelayQueue.open({
      postgres: 'postgres://127.0.0.1:1/app',
      fireIntervalMs: ms as number,
    });
    await expect(opening).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringContaining('fireIntervalMs'),
    });
  });
});

describe.runIf(postgresInstalled())('DelayQueue.open({ postgres }) refused by PostgreSQL', () => {
  let server: { url: string; port: number; stop(): Promise<void> };
  beforeAll(async () => {
    server = await startPostgres({ password: 'right-one' });
  }, 60_000);
  afterAll(() => server?.stop());

  // Ten minutes of connect timeout: a wait would outlast the test's own timeout.
  const open = (url: string) =>
    DelayQueue.open({ postgres: url, connectTimeoutMs: 600_000 }).catch((e: unknown) => e);

  it('fails at once on a wrong password, naming the refusal, the password hidden', async () => {
    const url = `postgres://tickwheel:wrong-one@127.0.0.1:${server.port}/postgres`;
    const err = (await open(url)) as Error & { code?: string };
    expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
    expect(err.message).toContain('password authentication failed');
    expect(err.message).not.toContain('wrong-one');
  }, 30_000);

  it('fails at once on a database that does not exist', async () => {
    const url = server.url.replace(/\/postgres$/, '/no_such_db');
    const err = (await open(url)) as Error & { code?: string };
    expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
    expect(err.message).toContain('"no_such_db" does not exist');
  }, 30_000);

  it('opens with the right password', async () => {
    const queue = await DelayQueue.open({ postgres: server.url, queue: 'reach' });
    await queue.close();
  }, 30_000);
});
