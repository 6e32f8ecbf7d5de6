import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { bench } from '../../src/cli/bench.js';
import type { CliIo } from '../../src/cli/io.js';
import { parseDuration, parsePayload, parseTime } from '../../src/cli/parse.js';
import { main } from '../../src/cli/program.js';
import { DelayQueue, MemoryStore } from '../../src/queue-entry.js';
import { createServer, type TickwheelServer } from '../../src/server/index.js';
import { CLI, runCli } from '../server/process.js';

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
      ],
    ],
    ['send', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN', '--delay', '--at', '--id']],
    ['get', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['cancel', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['receive', ['TICKWHEEL_URL', '--ack']],
    ['stats', ['TICKWHEEL_URL', 'TICKWHEEL_TOKEN']],
    ['bench', ['timers, queue and/or http', '--list']],
  ])('tickwheel %s --help lists its flags and their variables', async (command, words) => {
    const text = await help([command]);
    expect(text).toContain(`Usage: tickwheel ${command}`);
    for (const word of words) expect(text).toContain(word);
  });

  it('tickwheel --help lists the commands', async () => {
    const text = await help([]);
    for (const command of ['serve', 'send', 'get', 'cancel', 'receive', 'stats', 'bench']) {
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
      [['stats', '--verbose'], "Unknown option '--verbose'"],
      [['get'], "missing required argument 'id'"],
      [['get', 'a', 'b'], 'too many arguments'],
      [
        ['send', 't', '--delay', '1s', '--at', '0'],
        'option --delay cannot be used together with --at',
      ],
      [['serve', '--fsync', 'sometimes'], 'option --fsync: give one of batch, always, never'],
      [['serve', '--dir'], "Option '--dir <value>' argument missing"],
    ];
    for (const [args, message] of cases) {
      const refused = await run(args);
      expect(refused, args.join(' ')).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr, args.join(' ')).toContain(message);
      expect(refused.stderr, args.join(' ')).toMatch(/--help shows the usage\)\n$/);
    }
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
    queue = await DelayQueue.open({ store: new MemoryStore() });
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
    expect(again.stderr).toContain('no pending message with id m-1');
  });

  it('receive prints ready messages and acks them with --ack', async () => {
    await run(['send', 'jobs', '{"n":1}']);
    const received = await run(['receive', 'jobs', '--wait', '2s', '--ack']);
    expect(received.code).toBe(0);
    expect(JSON.parse(received.stdout)).toMatchObject([{ topic: 'jobs', payload: { n: 1 } }]);
    expect((await queue.stats()).acked).toBe(1);
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
    const bad = await run(['send', '../x', '1']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(
      /^tickwheel: params\/topic must match pattern .*\(ERR_TICKWHEEL_INVALID_REQUEST, HTTP 400\)\n$/,
    );
    process.env.TICKWHEEL_URL = 'http://127.0.0.1:1';
    const down = await run(['stats', '--timeout', '2s']);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain('cannot reach the server');
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
    const root = mkdtempSync(join(tmpdir(), 'tickwheel-installed-'));
    try {
      const scripts = { 'bench:timers': 'exit 3', 'bench:queue': 'exit 3', 'bench:http': 'exit 3' };
      writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'tickwheel', scripts }));
      const io = captured();
      const failure = await bench(['timers'], [], { root: `${root}/` }, io).catch((e) => e);
      expect(failure).toMatchObject({ name: 'CliError', exitCode: 1 });
      expect(failure.message).toMatch(
        /ship with the tickwheel repository, not with the npm package/,
      );
      expect(failure.message).toContain('git clone https://github.com/tickwheel/tickwheel.git');
      expect(failure.message).toContain('npm run bench:timers');
      expect(io.stderr()).toBe('');

      await bench([], [], { list: true, root: `${root}/` }, io);
      expect(io.stdout()).toContain(
        'timers  (not available here: needs a clone of the repository)',
      );

      // A clone has bench/ and the build's config: there the script runs.
      mkdirSync(join(root, 'bench'));
      writeFileSync(join(root, 'tsconfig.build.json'), '{}');
      await expect(bench(['timers'], [], { root: `${root}/` }, io)).rejects.toThrow(
        'bench:timers failed (exit status 3)',
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
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
