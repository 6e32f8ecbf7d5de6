import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { bench } from '../../src/cli/bench.js';
import type { CliIo } from '../../src/cli/io.js';
import {
  parseDuration,
  parsePayload,
  parsePayloadArgument,
  parseTime,
} from '../../src/cli/parse.js';
import { main } from '../../src/cli/program.js';
import { DelayQueue, MemoryStore } from '../../src/delay-queue.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { CLI, runCli, startServer, type ServerProcess } from '../server/process.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('cli');

/** The CLI in-process, writing into buffers. */
function captured(stdin = ''): CliIo & { stdout: () => string; stderr: () => string } {
  let out = '';
  let err = '';
  return {
    out: (text) => void (out += text),
    err: (text) => void (err += text),
    readStdin: async () => stdin,
    stdout: () => out,
    stderr: () => err,
  };
}

async function run(args: string[], stdin = '') {
  const io = captured(stdin);
  const code = await main(['node', 'tickwheel', ...args], io);
  return { code, stdout: io.stdout(), stderr: io.stderr() };
}

async function help(args: string[]): Promise<string> {
  const shown = await run([...args, '--help']);
  expect(shown).toMatchObject({ code: 0, stderr: '' });
  return shown.stdout;
}

describe('--help', () => {
  it.each([
    [
      'serve',
      [
        'TICKWHEEL_DIR',
        'TICKWHEEL_PORT',
        'TICKWHEEL_HOST',
        'TICKWHEEL_TOKEN',
        'TICKWHEEL_FSYNC',
        'TICKWHEEL_LOG_LEVEL',
        'TICKWHEEL_BODY_LIMIT',
        'TICKWHEEL_POSTGRES',
        '--pool-size',
      ],
    ],
    ['send', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '--delay', '--at', '--id']],
    ['get', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['cancel', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['receive', ['TICKWHEEL_URL', '--ack']],
    ['stats', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['reschedule', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '--delay', '--at']],
    ['ack', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '<receipts...>']],
    ['nack', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '<receipts...>', '--delay']],
    ['dead', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '--limit']],
    ['list', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '--from', '--until', '--limit', '--cursor']],
    ['requeue', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '<ids...>', '--delay']],
    ['bench', ['timers, queue and/or http', '--list']],
  ])('tickwheel %s --help lists its flags and their variables', async (command, words) => {
    const text = await help([command]);
    expect(text).toContain(`Usage: tickwheel ${command}`);
    for (const word of words) expect(text).toContain(word);
  });

  it('tickwheel --help lists the commands', async () => {
    const text = await help([]);
    const commands = ['serve', 'send', 'get', 'cancel', 'reschedule', 'receive', 'ack', 'nack'];
    for (const command of [...commands, 'list', 'dead', 'requeue', 'stats', 'bench']) {
      expect(text).toContain(command);
    }
  });
});

describe('the command line', () => {
  it('without a command prints the usage on stderr and exits 1', async () => {
    const none = await run([]);
    expect(none.code).toBe(1);
    expect(none.stdout).toBe('');
    expect(none.stderr).toContain('Usage: tickwheel [options] <command>');
  });

  it('help <command> is the same as <command> --help', async () => {
    const viaHelp = await run(['help', 'receive']);
    expect(viaHelp.code).toBe(0);
    expect(viaHelp.stdout).toBe(await help(['receive']));
  });

  it('refuses unknown commands and options, missing and extra arguments, with a usage hint', async () => {
    const cases: Array<[string[], string]> = [
      [['sned'], "unknown command 'sned'"],
      [['--verbose'], "unknown option '--verbose'"],
      [['stats', '--verbose'], "unknown option '--verbose'"],
      [['serve', '--prot', '7000'], "unknown option '--prot' (did you mean --port?)"],
      [['send', 't', '1', '--delay', '-5s'], 'option --delay got -5s: a negative value'],
      [['send', 't', '1', '--timeout', '0'], 'option --timeout: give a duration above 0'],
      [
        ['serve', '--dir', '/tmp/d', '--redis', 'redis://127.0.0.1:1'],
        'option --dir cannot be used together with --redis',
      ],
      [['serve', '--partitions', '4'], 'option --partitions is used only with --redis'],
      [['serve', '--durability', 'async'], 'option --durability is used only with --redis'],
      [
        ['serve', '--postgres', 'postgres://127.0.0.1:1/db', '--dir', '/tmp/d'],
        'option --dir cannot be used together with --postgres',
      ],
      [
        ['serve', '--postgres', 'postgres://127.0.0.1:1/db', '--redis', 'redis://127.0.0.1:1'],
        'option --postgres cannot be used together with --redis',
      ],
      [
        ['serve', '--postgres', 'postgres://127.0.0.1:1/db', '--durability', 'async'],
        'option --durability cannot be used together with --postgres',
      ],
      [['serve', '--pool-size', '4'], 'option --pool-size is used only with --postgres'],
      [
        ['serve', '--postgres', 'postgres://127.0.0.1:1/db', '--fsync', 'always'],
        'option --fsync cannot be used together with --postgres',
      ],
      [
        ['serve', '--redis', 'redis://127.0.0.1:1', '--payload-memory', '64'],
        'option --payload-memory cannot be used together with --redis',
      ],
      [
        ['serve', '--node-id', 'a'],
        'option --node-id is used only with --redis or --postgres: give one of them too',
      ],
      [['get'], "missing required argument 'id'"],
      [['get', 'a', 'b'], 'too many arguments'],
      [
        ['send', 't', '--delay', '1s', '--at', '0'],
        'option --delay cannot be used together with --at',
      ],
      [['serve', '--fsync', 'sometimes'], 'option --fsync: give one of batch, always, never'],
      [['serve', '--dir'], "Option '--dir <value>' argument missing"],
      [['serve', '--push-allow', '10.0.0.0/40'], 'option --push-allow: give CIDR blocks'],
      [['serve', '--max-wait', '2h'], 'option --max-wait: give a duration from 0ms to 1h'],
      [
        ['serve', '--connection-timeout', '0'],
        'option --connection-timeout: give a duration from 100ms to 1h',
      ],
      [
        ['serve', '--redis', 'redis://127.0.0.1:1', '--connect-timeout', '11m'],
        'option --connect-timeout: give a duration from 1ms to 10m',
      ],
    ];
    for (const [args, message] of cases) {
      const refused = await run(args);
      expect(refused, args.join(' ')).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr, args.join(' ')).toContain(message);
      expect(refused.stderr, args.join(' ')).toMatch(/--help shows the usage\)\n$/);
    }
  });

  it('refuses Valkey/Redis and PostgreSQL both given, one from the environment', async () => {
    const io = captured();
    const env = { TICKWHEEL_POSTGRES: 'postgres://127.0.0.1:1/db' };
    const args = ['node', 'tickwheel', 'serve', '--redis', 'redis://127.0.0.1:1'];
    expect(await main(args, io, env)).toBe(1);
    expect(io.stderr()).toContain('give --redis or --postgres, not both');
  });

  it('refuses a connection string it cannot use before listening: no log line says it is joining', async () => {
    const cases: Array<[string[], string]> = [
      [
        ['serve', '--port', '0', '--postgres', 'mysql://u@h/db'],
        'postgres must be a postgres:// or postgresql:// connection string',
      ],
      [
        ['serve', '--port', '0', '--redis', 'redis://127.0.0.1:1/abc'],
        'its path must be a database number such as /0',
      ],
    ];
    for (const [args, message] of cases) {
      const refused = await run(args);
      expect(refused, args.join(' ')).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr, args.join(' ')).toContain(message);
      expect(refused.stderr, args.join(' ')).toContain('ERR_TICKWHEEL_INVALID_OPTION');
    }
  });

  it('names the --host or --port that cannot be listened on', async () => {
    const unknown = await runCli([
      'serve',
      '--dir',
      tempDir(),
      '--host',
      '999.1.1.1',
      '--port',
      '0',
    ]);
    expect(unknown.code).toBe(1);
    // ENOTFOUND, or EAI_AGAIN where no name server answers.
    expect(unknown.stderr).toMatch(/cannot listen on 999\.1\.1\.1:0: .*\(--host, TICKWHEEL_HOST\)/);
    expect(unknown.stderr).toContain('ERR_TICKWHEEL_INVALID_OPTION');
  });

  it('says a damaged format.json is damaged, and how to mend it', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'format.json'), '{"form');
    const refused = await runCli(['serve', '--dir', dir, '--port', '0']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${join(dir, 'format.json')} is damaged`);
    expect(refused.stderr).toMatch(/write \{"format":\d+\} into that file/);
  });

  it('checks values from the environment as it checks flags', async () => {
    const io = captured();
    const code = await main(['node', 'tickwheel', 'serve'], io, { TICKWHEEL_PORT: 'eighty' });
    expect(code).toBe(1);
    expect(io.stderr()).toContain(
      'environment variable TICKWHEEL_PORT: give a whole number from 0 to 65535 (got "eighty")',
    );
  });
});

describe('client commands', () => {
  let queue: DelayQueue;
  let server: TickwheelServer;
  let url: string;
  const saved = { ...process.env };

  beforeEach(async () => {
    queue = await DelayQueue.open({ store: new MemoryStore(), push: { allow: ['127.0.0.1'] } });
    server = await createServer({ queue, logLevel: 'silent', token: 'cli-token' });
    await server.listen({ port: 0, host: '127.0.0.1' });
    url = `http://127.0.0.1:${(server.server.address() as { port: number }).port}`;
    process.env.TICKWHEEL_URL = url;
    process.env.TICKWHEEL_TOKEN = 'cli-token';
  });

  afterEach(async () => {
    process.env = { ...saved };
    await server.close();
    await queue.close();
  });

  it('topics, pause, resume and rate-limit change and show topic settings', async () => {
    await run(['send', 'mail', '1']);
    const paused = await run(['pause', 'mail', 'other']);
    expect(paused.code).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject([
      { topic: 'mail', paused: true, pending: 1 },
      { topic: 'other', paused: true, pending: 0 },
    ]);
    expect(JSON.parse((await run(['receive', 'mail'])).stdout)).toEqual([]);
    const limited = await run(['rate-limit', 'mail', '2.5', '--burst', '4']);
    expect(JSON.parse(limited.stdout)).toMatchObject({
      paused: true,
      rateLimit: { perSecond: 2.5, burst: 4 },
    });
    expect(JSON.parse((await run(['resume', 'mail'])).stdout)).toMatchObject({ paused: false });
    const names = (page: { topics: Array<{ topic: string }> }) => page.topics.map((t) => t.topic);
    expect(names(JSON.parse((await run(['topics'])).stdout))).toEqual(['mail', 'other']);
    // A page at a time: the next page named on stderr.
    const first = await run(['topics', '--limit', '1']);
    expect(JSON.parse(first.stdout)).toMatchObject({ cursor: 'mail' });
    expect(names(JSON.parse(first.stdout))).toEqual(['mail']);
    expect(first.stderr).toContain('--cursor mail');
    const second = await run(['topics', '--limit', '1', '--cursor', 'mail']);
    expect(JSON.parse(second.stdout)).toEqual({
      topics: [expect.objectContaining({ topic: 'other' })],
    });
    expect(JSON.parse((await run(['rate-limit', 'mail', 'off'])).stdout).rateLimit).toBeNull();
    expect(JSON.parse((await run(['topics', 'mail'])).stdout)).toEqual({
      topic: 'mail',
      paused: false,
      rateLimit: null,
      push: null,
      pending: 1,
      dead: 0,
    });
    const bad = await run(['rate-limit', 'mail', 'fast']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('rate must be deliveries per second');
    const tooFast = await run(['rate-limit', 'mail', '5000000']);
    expect(tooFast.code).toBe(1);
    expect(tooFast.stderr).toContain(
      '0.001 to 1000000, or off; got 5000000\n(tickwheel rate-limit',
    );
  });

  it('push sets and removes a push target; the secret comes from the environment', async () => {
    const secret = 'cli-push-secret-0123456789';
    const usage = await run(['push', 'hooks', 'http://127.0.0.1:9/in']);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toContain('push needs --secret (or TICKWHEEL_PUSH_SECRET)');
    const badHeaders = await run([
      'push',
      'hooks',
      'http://x/',
      '--secret',
      secret,
      '--headers',
      '[1]',
    ]);
    expect(badHeaders.stderr).toContain('--headers must be a JSON object of strings');
    process.env.TICKWHEEL_PUSH_SECRET = secret;
    try {
      const set = await run([
        'push',
        'hooks',
        'http://127.0.0.1:9/in',
        '--method',
        'PUT',
        '--headers',
        '{"Authorization":"Bearer t"}',
        '--push-timeout',
        '2500',
        '--concurrency',
        '3',
      ]);
      expect(set.code).toBe(0);
      expect(set.stdout).not.toContain(secret);
      expect(JSON.parse(set.stdout).push).toEqual({
        url: 'http://127.0.0.1:9/in',
        method: 'PUT',
        headerNames: ['authorization'],
        timeoutMs: 2500,
        concurrency: 3,
      });
    } finally {
      delete process.env.TICKWHEEL_PUSH_SECRET;
    }
    const refused = await run(['push', 'hooks', 'ftp://x/', '--secret', secret]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('ERR_TICKWHEEL_INVALID_OPTION');
    // A private address the server was not told to allow.
    const internal = await run(['push', 'hooks', 'http://10.0.0.1/in', '--secret', secret]);
    expect(internal.code).toBe(1);
    expect(internal.stderr).toContain('ERR_TICKWHEEL_PUSH_NOT_ALLOWED');
    expect(internal.stderr).toContain('--push-allow');
    const off = await run(['push', 'hooks', 'off']);
    expect(off.code).toBe(0);
    expect(JSON.parse(off.stdout).push).toBeNull();
  });

  it('schedule, schedules and unschedule manage recurring schedules', async () => {
    const made = await run([
      'schedule',
      'nightly',
      '--topic',
      'reports',
      '--cron',
      '30 2 * * *',
      '--tz',
      'Europe/Berlin',
      '--payload',
      '{"r":1}',
    ]);
    expect(made.code).toBe(0);
    expect(JSON.parse(made.stdout)).toMatchObject({
      name: 'nightly',
      topic: 'reports',
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      payload: { r: 1 },
      created: 1,
    });
    const every = await run([
      'schedule',
      'tick',
      '--topic',
      'ticks',
      '--every',
      '1h',
      '--catch-up',
      'none',
    ]);
    expect(JSON.parse(every.stdout)).toMatchObject({ everyMs: 3_600_000, catchUp: 'none' });
    const paused = await run(['schedule', 'tick', '--pause']);
    expect(JSON.parse(paused.stdout)).toMatchObject({ paused: true, nextAt: null });
    expect(JSON.parse((await run(['schedule', 'tick', '--resume'])).stdout).paused).toBe(false);
    expect(
      JSON.parse((await run(['schedules'])).stdout).map((s: { name: string }) => s.name),
    ).toEqual(['nightly', 'tick']);
    expect(JSON.parse((await run(['schedules', 'tick'])).stdout).everyMs).toBe(3_600_000);
    const removed = await run(['unschedule', 'tick', 'nope']);
    expect(removed.code).toBe(1);
    expect(JSON.parse(removed.stdout)).toEqual({ deleted: 1, results: [true, false] });
    expect(removed.stderr).toContain('no schedule named nope');
    const missing = await run(['schedules', 'tick']);
    expect(missing.code).toBe(1);
    const bad = await run(['schedule', 'x', '--topic', 't', '--cron', '99 * * * *']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('cron "99 * * * *" in UTC');
    const neither = await run(['schedule', 'x']);
    expect(neither.code).toBe(1);
    expect(neither.stderr).toContain('give --topic with --cron or --every');
    const both = await run([
      'schedule',
      'x',
      '--topic',
      't',
      '--cron',
      '* * * * *',
      '--every',
      '1m',
    ]);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('cannot be used together');
    // A range refused naming the flag, before any request.
    const fast = await run(['schedule', 'x', '--topic', 't', '--every', '10ms']);
    expect(fast.code).toBe(1);
    expect(fast.stderr).toContain('option --every: give a duration from 1s to 366d (got "10ms")');
  });

  it('send schedules JSON, strings and stdin; get shows it; cancel cancels it', async () => {
    const sent = await run(['send', 'emails', '{"to":"a@b.c"}', '--delay', '5m', '--id', 'm-1']);
    expect(sent.code).toBe(0);
    const result = JSON.parse(sent.stdout);
    expect(result).toMatchObject({ id: 'm-1', due: new Date(result.deliverAt).toISOString() });
    expect(result.deliverAt - Date.now()).toBeGreaterThan(290_000);

    const got = await run(['get', 'm-1']);
    expect(JSON.parse(got.stdout)).toMatchObject({
      id: 'm-1',
      topic: 'emails',
      status: 'scheduled',
    });

    await run(['send', 'emails', 'plain words', '--id', 'm-2', '--delay', '1h']);
    await run(['send', 'emails', '-', '--id', 'm-3', '--at', '2099-01-01T00:00:00Z'], '{"n":3}');
    expect((await queue.get('m-3'))?.deliverAt).toBe(Date.parse('2099-01-01T00:00:00Z'));

    const cancelled = await run(['cancel', 'm-1']);
    expect(cancelled).toMatchObject({ code: 0 });
    expect(JSON.parse(cancelled.stdout)).toEqual({ cancelled: true });
    const again = await run(['cancel', 'm-1']);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe('tickwheel: message m-1 is cancelled, not pending\n');
    const unknown = await run(['cancel', 'never-sent']);
    expect(unknown.stderr).toBe('tickwheel: no message with id never-sent\n');
  });

  it('cancel, reschedule and requeue say why they changed nothing from the refusal itself', async () => {
    await run(['send', 'later', '1', '--id', 'c-1', '--delay', '1h']);
    await queue.cancel('c-1');
    // The server reads the message once to say why; a second request would read it again.
    const get = vi.spyOn(queue, 'get');
    const refusals: Array<[string[], string]> = [
      [['cancel', 'c-1'], 'message c-1 is cancelled, not pending'],
      [['reschedule', 'c-1', '--delay', '1s'], 'message c-1 is cancelled, not pending'],
      [['requeue', 'c-1'], 'message c-1 is cancelled; only dead letters can be requeued'],
    ];
    for (const [args, reason] of refusals) {
      get.mockClear();
      expect(await run(args)).toMatchObject({ code: 1, stderr: `tickwheel: ${reason}\n` });
      expect(get, args[0]).toHaveBeenCalledTimes(1);
    }
  });

  it('receive prints ready messages and acks them with --ack', async () => {
    await run(['send', 'jobs', '{"n":1}']);
    const received = await run(['receive', 'jobs', '--wait', '2s', '--ack']);
    expect(received.code).toBe(0);
    expect(JSON.parse(received.stdout)).toMatchObject([{ topic: 'jobs', payload: { n: 1 } }]);
    expect((await queue.stats()).acked).toBe(1);
  });

  it('reschedule moves a pending message, and says why it cannot', async () => {
    await run(['send', 'later', '1', '--id', 'r-1', '--delay', '5m']);
    const moved = await run(['reschedule', 'r-1', '--delay', '1h']);
    expect(moved.code).toBe(0);
    const result = JSON.parse(moved.stdout);
    expect(result).toMatchObject({ rescheduled: true, id: 'r-1' });
    expect(result.due).toBe(new Date(result.deliverAt).toISOString());
    expect(result.deliverAt - Date.now()).toBeGreaterThan(3_590_000);
    expect((await queue.get('r-1'))?.deliverAt).toBe(result.deliverAt);

    const at = await run(['reschedule', 'r-1', '--at', '2099-01-01T00:00:00Z']);
    expect(JSON.parse(at.stdout).deliverAt).toBe(Date.parse('2099-01-01T00:00:00Z'));
    expect((await queue.get('r-1'))?.deliverAt).toBe(Date.parse('2099-01-01T00:00:00Z'));

    expect(await run(['reschedule', 'r-1'])).toMatchObject({
      code: 1,
      stdout: '',
      stderr: 'tickwheel: give the new due time with --delay <duration> or --at <time>\n',
    });
    expect(await run(['reschedule', 'nope', '--delay', '1s'])).toMatchObject({
      code: 1,
      stderr: 'tickwheel: no message with id nope\n',
    });
    await run(['send', 'busy', '1', '--id', 'r-2']);
    await queue.receive('busy', { waitMs: 1000 });
    expect(await run(['reschedule', 'r-2', '--delay', '1s'])).toMatchObject({
      code: 1,
      stderr: 'tickwheel: message r-2 is in flight; ack or nack it first\n',
    });
  });

  it('nack gives deliveries back and ack finishes them; a receipt that is not live fails', async () => {
    await run(['send', 'work', '1', '--id', 'n-1']);
    await run(['send', 'work', '2', '--id', 'n-2']);
    let received: Array<{ id: string; receipt: string }> = [];
    while (received.length < 2) {
      const printed = await run(['receive', 'work', '--max', '2', '--wait', '2s']);
      received = [...received, ...JSON.parse(printed.stdout)];
    }
    const [one, two] = received;
    const nacked = await run(['nack', one.receipt, '--delay', '1h', '--reason', 'smtp said 451']);
    expect(nacked.code, nacked.stderr).toBe(0);
    expect(JSON.parse(nacked.stdout)).toEqual({ nacked: 1, results: [true] });
    const info = await queue.get(one.id);
    expect(info?.status).toBe('scheduled');
    expect(info?.lastError).toBe('smtp said 451');
    expect(info!.deliverAt - Date.now()).toBeGreaterThan(3_590_000);

    const stale = await run(['nack', one.receipt]);
    expect(stale.code).toBe(1);
    expect(JSON.parse(stale.stdout)).toEqual({ nacked: 0, results: [false] });
    expect(stale.stderr).toBe(
      `tickwheel: 1 of 1 receipts were not live deliveries (unknown, expired, or acked or nacked already): ${one.receipt}\n`,
    );

    const acked = await run(['ack', two.receipt, 'bogus']);
    expect(acked.code).toBe(1);
    expect(JSON.parse(acked.stdout)).toEqual({ acked: 1, results: [true, false] });
    expect(acked.stderr).toContain('1 of 2 receipts were not live deliveries');
    expect((await queue.get(two.id))?.status).toBe('acked');
  });

  it('dead lists dead letters; requeue puts them back', async () => {
    await run(['send', 'jobs', '1', '--id', 'd-1', '--max-attempts', '1']);
    await run(['send', 'jobs', '2', '--id', 'd-2', '--max-attempts', '1']);
    let received: Array<{ receipt: string }> = [];
    while (received.length < 2) {
      received = [...received, ...(await queue.receive('jobs', { max: 2, waitMs: 1000 }))];
    }
    expect(await queue.nackMany(received.map((message) => message.receipt))).toEqual([true, true]);

    const dead = await run(['dead', 'jobs']);
    expect(dead.code).toBe(0);
    expect(JSON.parse(dead.stdout)).toMatchObject([
      { id: 'd-1', topic: 'jobs', status: 'dead', attempts: 1 },
      { id: 'd-2', topic: 'jobs', status: 'dead', attempts: 1 },
    ]);
    expect(JSON.parse((await run(['dead', 'jobs', '--limit', '1'])).stdout)).toHaveLength(1);
    expect(JSON.parse((await run(['dead', 'empty'])).stdout)).toEqual([]);

    const requeued = await run(['requeue', 'd-1', '--delay', '1h']);
    expect(requeued).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(requeued.stdout)).toEqual({ requeued: 1, results: [true] });
    expect(await queue.get('d-1')).toMatchObject({ status: 'scheduled', attempts: 0 });

    const mixed = await run(['requeue', 'd-2', 'd-1', 'nope']);
    expect(mixed.code).toBe(1);
    expect(JSON.parse(mixed.stdout)).toEqual({ requeued: 1, results: [true, false, false] });
    expect(mixed.stderr).toBe(
      'tickwheel: message d-1 is scheduled; only dead letters can be requeued; no dead message with id nope\n',
    );
    expect(JSON.parse((await run(['dead', 'jobs'])).stdout)).toEqual([]);
  });

  it('refuses a bad rate, a short secret and an empty stdin before sending, in one line', async () => {
    expect(await run(['push', 'mail', 'http://127.0.0.1:9/x', '--secret', 'short'])).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'tickwheel: --secret must be 16 to 512 characters, got 5\n(tickwheel push --help shows the usage)\n',
    });
    expect(await run(['rate-limit', 'mail', '0.0001'])).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'tickwheel: rate must be deliveries per second, 0.001 to 1000000, or off; got 0.0001\n(tickwheel rate-limit --help shows the usage)\n',
    });
    expect((await run(['rate-limit', 'mail', 'off', '--burst', '2'])).stderr).toContain(
      '(tickwheel rate-limit --help shows the usage)',
    );
    for (const stdin of ['', ' \n']) {
      expect(await run(['send', 'mail', '-'], stdin)).toMatchObject({
        code: 1,
        stderr: "tickwheel: stdin is empty: give the payload there, or 'null' for none\n",
      });
    }
    expect((await queue.stats()).scheduled).toBe(0);
  });

  it('a 401 says to give the token with --token or TICKWHEEL_TOKEN', async () => {
    delete process.env.TICKWHEEL_TOKEN;
    const none = await run(['stats']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^tickwheel: .*--token or TICKWHEEL_TOKEN.*HTTP 401\)\n$/);
    expect(none.stderr).not.toContain('Authorization');
    const wrong = await run(['stats', '--token', 'nope']);
    expect(wrong.stderr).toMatch(/not valid: give it with --token or TICKWHEEL_TOKEN/);
  });

  it('stats prints the queue statistics', async () => {
    const stats = await run(['stats']);
    expect(stats.code).toBe(0);
    expect(JSON.parse(stats.stdout)).toHaveProperty('scheduled', 0);
  });

  it('flags win over the environment', async () => {
    const wrong = await run(['stats', '--token', 'nope']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('ERR_TICKWHEEL_UNAUTHORIZED');
    expect(wrong.stderr).toContain('HTTP 401');
  });

  it('the last of a repeated flag wins', async () => {
    const repeated = await run(['stats', '--token', 'nope', '--token', 'cli-token']);
    expect(repeated.code).toBe(0);
  });

  it('says what went wrong, in one line, with exit status 1', async () => {
    expect(await run(['get', 'missing'])).toMatchObject({
      code: 1,
      stderr: 'tickwheel: no message with id missing\n',
    });
    const unquoted = await run(['send', 't', '{"to":"a@b.c"']);
    expect(unquoted.code).toBe(1);
    expect(unquoted.stderr).toMatch(/^tickwheel: the payload starts with '\{' but is not JSON/);
    const bad = await run(['send', '../x', '1']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^tickwheel: topic must be 1-128 characters of letters, digits, .*; got the string "\.\.\/x" \(ERR_TICKWHEEL_INVALID_TOPIC\)\n$/,
    );
    const dots = await run(['cancel', '..']);
    expect(dots.code).toBe(1);
    expect(dots.stderr).toMatch(
      /^tickwheel: id must be .*other than '\.' and '\.\.'.*\(ERR_TICKWHEEL_INVALID_ID\)\n$/,
    );
    const redis = await run(['serve', '--redis', 'notaurl']);
    expect(redis.code).toBe(1);
    expect(redis.stderr).toContain('redis+sentinel:// URL, got the string "notaurl" (');
    const schemeless = await run(['stats', '--url', 'localhost:47210']);
    expect(schemeless.code).toBe(1);
    expect(schemeless.stderr).toMatch(
      /^tickwheel: url must be an absolute http:\/\/ or https:\/\/ URL.*\(ERR_TICKWHEEL_INVALID_OPTION\)\n$/,
    );
    process.env.TICKWHEEL_URL = 'http://127.0.0.1:1';
    const down = await run(['stats', '--timeout', '2s']);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('cannot reach the server');
    // Why (fetch refuses port 1 outright), and where the address came from.
    expect(down.stderr).toContain('fetch failed: bad port');
    expect(down.stderr).toContain('--url or TICKWHEEL_URL');
  });
});

describe('the built CLI against a tickwheel serve process', () => {
  let server: ServerProcess | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await server?.kill();
    server = undefined;
    dir = undefined;
  });

  it('send, receive, nack into the dead letters, dead, requeue, reschedule', async () => {
    dir = tempDir();
    server = await startServer(['--dir', dir, '--token', 'e2e-token']);
    const env = { TICKWHEEL_URL: server.url, TICKWHEEL_TOKEN: 'e2e-token' };
    const cli = async (...args: string[]) => {
      const result = await runCli(args, { env });
      return { ...result, json: result.code === 0 ? JSON.parse(result.stdout) : undefined };
    };

    expect((await cli('send', 'mail', '{"n":1}', '--id', 'e-1', '--max-attempts', '1')).code).toBe(
      0,
    );
    let received = await cli('receive', 'mail', '--wait', '5s');
    expect(received.json).toMatchObject([{ id: 'e-1', payload: { n: 1 }, attempts: 1 }]);
    expect((await cli('nack', received.json[0].receipt)).json).toEqual({
      nacked: 1,
      results: [true],
    });
    expect((await cli('dead', 'mail', '--limit', '10')).json).toMatchObject([
      { id: 'e-1', status: 'dead' },
    ]);
    expect((await cli('requeue', 'e-1', '--delay', '1h')).json).toEqual({
      requeued: 1,
      results: [true],
    });
    const moved = await cli('reschedule', 'e-1', '--delay', '0');
    expect(moved.json).toMatchObject({ rescheduled: true, id: 'e-1' });
    received = await cli('receive', 'mail', '--wait', '5s');
    expect(received.json).toMatchObject([{ id: 'e-1', attempts: 1 }]);
    expect((await cli('ack', received.json[0].receipt)).json).toEqual({
      acked: 1,
      results: [true],
    });
    expect((await cli('get', 'e-1')).json).toMatchObject({ status: 'acked' });
  });

  it('serve --max-schedules bounds the recurring schedules; schedule says why one more is refused', async () => {
    dir = tempDir();
    server = await startServer(['--dir', dir, '--max-schedules', '1']);
    const env = { TICKWHEEL_URL: server.url };
    const schedule = (name: string) =>
      runCli(['schedule', name, '--topic', 't', '--every', '1m'], { env });
    expect((await schedule('a')).code).toBe(0);
    const refused = await schedule('b');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('ERR_TICKWHEEL_CONFLICT');
    expect(refused.stderr).toContain(
      '1 recurring schedule exists, the most this queue keeps (maxSchedules: 1)',
    );
    expect((await schedule('a')).code).toBe(0);
  });

  it('refuses bad flags of the new commands with a usage hint and status 1', async () => {
    const limit = await runCli(['dead', 'mail', '--limit', '0']);
    expect(limit.code).toBe(1);
    expect(limit.stderr).toContain('give a whole number from 1 to 10000');
    const both = await runCli(['reschedule', 'x', '--delay', '1s', '--at', '2030-01-01']);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain('option --delay cannot be used together with --at');
    expect(both.stderr).toContain('tickwheel reschedule --help shows the usage');
    const delay = await runCli(['nack', 'r', '--delay', 'soon']);
    expect(delay.code).toBe(1);
    expect(delay.stderr).toContain('give a duration');
    const none = await runCli(['requeue']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("missing required argument 'ids'");
  });
});

describe('bench', () => {
  it('lists the suites and refuses unknown ones', async () => {
    const io = captured();
    await bench([], [], { list: true, root: '/nonexistent/' }, io);
    expect(io.stdout()).toContain('timers');
    expect(io.stdout()).toContain('(not available here: needs a clone of the repository)');
    await expect(bench(['nope'], [], {}, io)).rejects.toThrow(/unknown suite nope/);
    await expect(bench(['timers'], [], { root: '/nonexistent/' }, io)).rejects.toThrow(/clone/);
  });

  it('in an installed package (scripts in package.json, no bench/) says it needs a clone', async () => {
    // What npm installs: the package.json with its bench:* scripts, but neither bench/ nor
    // the TypeScript build those scripts start with.
    const root = tempDir('installed');
    const scripts = { 'bench:timers': 'exit 3', 'bench:queue': 'exit 3', 'bench:http': 'exit 3' };
    writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'tickwheel', scripts }));
    const io = captured();
    const failure = await bench(['timers'], [], { root: `${root}/` }, io).catch((e) => e);
    expect(failure).toMatchObject({ name: 'CliError', exitCode: 1 });
    expect(failure.message).toMatch(/ship with the tickwheel repository, not with the npm package/);
    expect(failure.message).toContain('git clone https://github.com/tickwheel/tickwheel.git');
    expect(failure.message).toContain('npm run bench:timers');
    expect(io.stderr()).toBe('');

    await bench([], [], { list: true, root: `${root}/` }, io);
    expect(io.stdout()).toContain('timers  (not available here: needs a clone of the repository)');

    // A clone has bench/ and the build's config: there the script runs.
    mkdirSync(join(root, 'bench'));
    writeFileSync(join(root, 'tsconfig.build.json'), '{}');
    await expect(bench(['timers'], [], { root: `${root}/` }, io)).rejects.toThrow(
      'bench:timers failed (exit status 3)',
    );
  });
});

describe('parsers', () => {
  it('durations, times and payloads', () => {
    expect(parseDuration('1500')).toBe(1500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('1.5m')).toBe(90_000);
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('1d')).toBe(86_400_000);
    expect(() => parseDuration('-5s')).toThrow(/duration/);
    expect(() => parseDuration('soon')).toThrow(/duration/);
    expect(parseTime('1700000000000')).toBe(1_700_000_000_000);
    expect(parseTime('2030-01-01T09:00:00Z')).toBe(Date.UTC(2030, 0, 1, 9));
    expect(() => parseTime('tomorrow')).toThrow(/ISO 8601/);
    expect(parsePayload('{"a":1}')).toEqual({ a: 1 });
    expect(parsePayload('42')).toBe(42);
    expect(parsePayload('hello')).toBe('hello');
    expect(parsePayloadArgument(' [1]', 'the payload')).toEqual([1]);
    expect(parsePayloadArgument('hello {x', 'the payload')).toBe('hello {x');
    expect(parsePayloadArgument('"{bad"', 'the payload')).toBe('{bad');
    // A quote the shell took: an error, not a string sent without a word.
    expect(() => parsePayloadArgument('{to:a@b.c}', '--payload')).toThrow(
      /^--payload starts with '\{' but is not JSON \(.*\); to send it as text, give it as a JSON string: '"\{to:a@b\.c\}"'$/,
    );
    expect(() => parsePayloadArgument('[1,', 'the payload')).toThrow(/starts with '\['/);
  });
});

describe('the bin', () => {
  it('is an executable script that prints its version', async () => {
    expect(readFileSync(CLI, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const version = await runCli(['--version']);
    expect(version).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it('refuses bad flags with a usage hint', async () => {
    const bad = await runCli(['serve', '--port', 'http']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('give a whole number from 0 to 65535');
    const unknown = await runCli(['send']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("missing required argument 'topic'");
  });
});
