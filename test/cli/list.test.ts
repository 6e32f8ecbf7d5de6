/**
 * `tickwheel list`: the built CLI, as a child process, against a real `tickwheel serve`.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServer, type ServerProcess } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('cli-list');

/** Due times far enough ahead that nothing is delivered while the test runs. */
const BASE = Date.parse('2100-01-01T00:00:00Z');

describe('tickwheel list against a tickwheel serve process', () => {
  let server: ServerProcess;
  let env: Record<string, string>;

  const cli = async (...args: string[]) => {
    const result = await runCli(args, { env });
    return { ...result, json: result.code === 0 ? JSON.parse(result.stdout) : undefined };
  };

  beforeAll(async () => {
    server = await startServer(['--dir', tempDir(), '--token', 'list-token']);
    env = { TICKWHEEL_URL: server.url, TICKWHEEL_TOKEN: 'list-token' };
    for (const i of [2, 0, 4, 1, 3]) {
      const sent = await cli(
        'send',
        'mail',
        String(i),
        '--id',
        `m${i}`,
        '--at',
        `${BASE + i * 60_000}`,
      );
      expect(sent.code).toBe(0);
    }
  });

  afterAll(async () => {
    await server?.kill();
  });

  it('prints a page as JSON with due times, and the cursor of the next one', async () => {
    const first = await cli('list', 'mail', '--limit', '2');
    expect(first.code).toBe(0);
    expect(first.json.messages).toEqual([
      {
        id: 'm0',
        topic: 'mail',
        status: 'scheduled',
        deliverAt: BASE,
        attempts: 0,
        due: '2100-01-01T00:00:00.000Z',
      },
      expect.objectContaining({ id: 'm1', due: '2100-01-01T00:01:00.000Z' }),
    ]);
    expect(first.json.cursor).toEqual(expect.any(String));
    expect(first.stderr).toBe(`more: the next page is --cursor ${first.json.cursor}\n`);

    const ids: string[] = first.json.messages.map((m: { id: string }) => m.id);
    let cursor: string | undefined = first.json.cursor;
    while (cursor !== undefined) {
      const page = await cli('list', 'mail', '--limit', '2', '--cursor', cursor);
      expect(page.code).toBe(0);
      ids.push(...page.json.messages.map((m: { id: string }) => m.id));
      cursor = page.json.cursor;
      if (cursor === undefined) expect(page.stderr).toBe('');
    }
    expect(ids).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
  });

  it('takes --from and --until as ISO 8601 or epoch ms', async () => {
    const iso = await cli(
      'list',
      'mail',
      '--from',
      '2100-01-01T00:01:00Z',
      '--until',
      '2100-01-01T00:03:00Z',
    );
    expect(iso.json).toEqual({
      messages: [expect.objectContaining({ id: 'm1' }), expect.objectContaining({ id: 'm2' })],
    });
    const epoch = await cli('list', 'mail', '--from', String(BASE + 180_000));
    expect(epoch.json.messages.map((m: { id: string }) => m.id)).toEqual(['m3', 'm4']);
  });

  it('needs the token, as every /v1 route of a server with one', async () => {
    const without = await runCli(['list', 'mail'], { env: { TICKWHEEL_URL: server.url } });
    expect(without.code).toBe(1);
    expect(without.stderr).toContain('ERR_TICKWHEEL_UNAUTHORIZED');
    const response = await fetch(`${server.url}/v1/topics/mail/messages`);
    expect(response.status).toBe(401);
  });

  it('refuses bad values with one line and status 1', async () => {
    const limit = await runCli(['list', 'mail', '--limit', '1001']);
    expect(limit.code).toBe(1);
    expect(limit.stderr).toContain('give a whole number from 1 to 1000');
    const from = await runCli(['list', 'mail', '--from', 'yesterday']);
    expect(from.code).toBe(1);
    expect(from.stderr).toContain('give a time as Unix epoch milliseconds or ISO 8601');
    const backwards = await cli('list', 'mail', '--from', '2100-01-02', '--until', '2100-01-01');
    expect(backwards.code).toBe(1);
    expect(backwards.stderr).toMatch(/^tickwheel: .*until .* must not be before from/);
    const cursor = await cli('list', 'mail', '--cursor', 'bm90LWpzb24');
    expect(cursor.code).toBe(1);
    expect(cursor.stderr).toContain('cursor must be the cursor of the previous page');
    expect(cursor.stderr.trim().split('\n')).toHaveLength(1);
  });
});
