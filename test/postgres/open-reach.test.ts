/**
 * DelayQueue.open({ postgres }) on a PostgreSQL that is not there: it keeps trying until
 * connectTimeoutMs, then rejects with ERR_TICKWHEEL_UNAVAILABLE naming the server, its password
 * starred; a connectTimeoutMs, fireIntervalMs or fireAheadMs out of range is refused before any connection. A refusal that
 * waiting does not cure (a wrong password, a database that does not exist, TLS asked of a server
 * without it, a certificate not trusted) ends the open at once with ERR_TICKWHEEL_INVALID_STATE,
 * long before the connect timeout.
 */

import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayQueue } from '../../src/delay-queue.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { postgresInstalled, serverDir, startPostgres } from '../../scripts/postgres.mjs';
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

  it.each([
    ['fireIntervalMs', -1],
    ['fireIntervalMs', 1_001],
    ['fireIntervalMs', Number.NaN],
    ['fireIntervalMs', '5'],
    ['fireAheadMs', -1],
    ['fireAheadMs', 1_001],
    ['fireAheadMs', Number.POSITIVE_INFINITY],
    ['fireAheadMs', '50'],
  ])('refuses %s %s', async (name, ms) => {
    const opening = DelayQueue.open({ postgres: 'postgres://127.0.0.1:1/app', [name]: ms });
    await expect(opening).rejects.toMatchObject({
      code: 'ERR_TICKWHEEL_INVALID_OPTION',
      message: expect.stringContaining(name),
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

describe.runIf(postgresInstalled() && spawnSync('openssl', ['version']).status === 0)(
  'DelayQueue.open({ postgres }) and TLS',
  () => {
    let plain: { url: string; stop(): Promise<void> };
    let tls: { url: string; stop(): Promise<void> };
    let certificates: string | undefined;
    beforeAll(async () => {
      plain = await startPostgres();
      const { dir, cert, key } = selfSigned();
      certificates = dir;
      tls = await startPostgres({
        settings: { ssl: 'on', ssl_cert_file: cert, ssl_key_file: key },
      });
    }, 60_000);
    afterAll(async () => {
      await plain?.stop();
      await tls?.stop();
      if (certificates !== undefined) rmSync(certificates, { recursive: true, force: true });
    });

    // Ten minutes of connect timeout: a wait would outlast the test's own timeout.
    const open = (url: string) =>
      DelayQueue.open({ postgres: url, queue: 'tls', connectTimeoutMs: 600_000 }).catch(
        (e: unknown) => e,
      );
    const withMode = (url: string, mode: string) =>
      `${url}${url.includes('?') ? '&' : '?'}sslmode=${mode}`;

    it.each(['require', 'verify-full', 'prefer'])(
      'fails at once when sslmode=%s asks TLS of a server without it, saying so',
      async (mode) => {
        const err = (await open(withMode(plain.url, mode))) as Error & { code?: string };
        expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
        expect(err.message).toContain('the server does not offer it');
        expect(err.message).toContain('sslmode=disable');
      },
      30_000,
    );

    it('fails at once on a certificate it cannot verify, naming it', async () => {
      const err = (await open(withMode(tls.url, 'verify-full'))) as Error & { code?: string };
      expect(err.code).toBe('ERR_TICKWHEEL_INVALID_STATE');
      expect(err.message).toContain('certificate is not trusted');
      expect(err.message).toContain('SELF_SIGNED');
    }, 30_000);

    it('opens over TLS when told not to verify the certificate', async () => {
      const queue = await DelayQueue.open({
        postgres: withMode(tls.url, 'no-verify'),
        queue: 'tls',
      });
      try {
        await queue.schedule({ topic: 't', payload: 1, delayMs: 60_000 });
      } finally {
        await queue.close();
      }
    }, 30_000);
  },
);

/** A self-signed certificate and its key, in a directory the server's user owns. */
function selfSigned(): { dir: string; cert: string; key: string } {
  const dir = serverDir() as string;
  const key = join(dir, 'server.key');
  const cert = join(dir, 'server.crt');
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
    ].concat(['-keyout', key, '-out', cert]),
    { encoding: 'utf8' },
  );
  if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`);
  // The server refuses a key others may read; as root, it runs as the directory's owner.
  chmodSync(key, 0o600);
  const { uid, gid } = statSync(dir);
  if (process.getuid?.() === 0) {
    chownSync(key, uid, gid);
    chownSync(cert, uid, gid);
  }
  return { dir, cert, key };
}
