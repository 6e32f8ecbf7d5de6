/**
 * The package as its users get it: `npm pack`, then `npm install <tarball>` into a fresh project,
 * then plain Node (ESM and CommonJS), tsc, the `tickwheel` bin and the deploy/ files against
 * that install. One pack and one install, shared by every case; the cases run in order, and the
 * server's peers are installed half-way, with the command the missing-peer error names.
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_FILES, librarySource } from '../../src/cluster/library.js';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('package');

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund'];

/** Without npm's own npm_* variables (set under `npm test`), which a child npm would obey. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.toLowerCase().startsWith('npm_')) env[key] = value;
  }
  return { ...env, ...extra };
}

/** Every process a test starts; afterAll kills what is left, so none outlives the file. */
const started: ChildProcess[] = [];

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number },
): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolvePromise({ code, signal, stdout, stderr });
    });
  });
}

function must(result: Run, what: string): Run {
  if (result.code !== 0) {
    throw new Error(
      `${what} exited ${result.code ?? result.signal}\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result;
}

function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolvePromise(port));
    });
  });
}

/** Whether something still listens on the port (a fresh bind on it fails). */
function portInUse(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const probe = createNetServer();
    probe.once('error', () => resolvePromise(true));
    probe.listen(port, host, () => probe.close(() => resolvePromise(false)));
  });
}

interface Served {
  child: ChildProcess;
  url: string;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts a server process and resolves once it prints its address. */
function startServing(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<Served> {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.on('exit', (code, signal) => done({ code, signal })),
  );
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address in time:\n${out}`)), 30_000);
    child.stdout.on('data', () => {
      const match = /tickwheel listening on (http:\/\/[^\s"]+)/.exec(out);
      if (match === null) return;
      clearTimeout(timer);
      resolvePromise({
        child,
        url: match[1].replace('0.0.0.0', '127.0.0.1'),
        output: () => out,
        exited,
      });
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code ?? signal}) before listening:\n${out}`));
    });
  });
}

/** SIGTERM, as a supervisor stops it: the server drains, exits 0 and frees its port. */
async function stopsOnSigterm(served: Served, port: number, host?: string): Promise<void> {
  served.child.kill('SIGTERM');
  const exit = await served.exited;
  expect(exit, served.output()).toEqual({ code: 0, signal: null });
  expect(await portInUse(port, host)).toBe(false);
}

let work: string;
let app: string;
let installed: string;
let tarball: string;
let tarballFiles: string[];
let installOutput: string;
/** The command the missing-peer error names, e.g. `npm install fastify@5 prom-client@15`. */
let peerInstall: string;
let peersInstallOutput: string;

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) {
    throw new Error('dist/ is missing: run `npm run build` first (`npm test` does it in pretest)');
  }
  work = tempDir();
  // --ignore-scripts: prepack would rebuild dist/ under the other test files that use it.
  const packed = must(
    await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
      cwd: ROOT,
    }),
    'npm pack',
  );
  const [info] = JSON.parse(packed.stdout) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  tarball = join(work, info.filename);
  tarballFiles = info.files.map((file) => file.path);

  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch', version: '1.0.0', private: true, type: 'module' }),
  );
  const install = must(
    await run('npm', ['install', tarball, ...NPM_FLAGS], { cwd: app }),
    'npm install <tarball>',
  );
  installOutput = install.stdout + install.stderr;
  installed = join(app, 'node_modules', 'tickwheel');
}, 240_000);

afterAll(() => {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

function installedPackages(): string[] {
  const lock = JSON.parse(readFileSync(join(app, 'node_modules', '.package-lock.json'), 'utf8'));
  return Object.keys(lock.packages as Record<string, unknown>)
    .map((path) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length))
    .sort();
}

/** A package and its dependencies, as installed (optional ones that are absent left out). */
function dependencyClosure(name: string, seen = new Set<string>()): Set<string> {
  const dir = join(app, 'node_modules', name);
  if (seen.has(name) || !existsSync(dir)) return seen;
  seen.add(name);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  for (const dependency of Object.keys(pkg.dependencies ?? {})) dependencyClosure(dependency, seen);
  return seen;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

describe('the packed package', () => {
  it('ships dist/ with the sources its maps point to, docs and the changelog; no tests or benchmarks', () => {
    for (const path of ['dist/index.js', 'dist/cli/main.js', 'src/index.ts', 'docs/http-api.md']) {
      expect(tarballFiles).toContain(path);
    }
    // tickwheel/queue: its composition root, named after the class it exports.
    for (const path of ['dist/delay-queue.js', 'dist/delay-queue.d.ts', 'src/delay-queue.ts']) {
      expect(tarballFiles).toContain(path);
    }
    expect(tarballFiles.filter((path) => path.includes('queue-entry'))).toEqual([]);
    expect(tarballFiles).toContain('CHANGELOG.md');
    // What the incremental build of `npm start` keeps in dist/ stays out of the package.
    expect(tarballFiles.filter((path) => /tsbuildinfo|build-inputs/.test(path))).toEqual([]);
    expect(
      tarballFiles.filter((path) => /^(test|bench|deploy|scripts|examples)\//.test(path)),
    ).toEqual([]);

    const maps = filesUnder(join(installed, 'dist')).filter((path) => path.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(50);
    for (const map of maps) {
      const { sources } = JSON.parse(readFileSync(map, 'utf8')) as { sources: string[] };
      for (const source of sources) {
        const target = resolve(dirname(map), source);
        expect(existsSync(target), `${relative(installed, map)} -> ${source}`).toBe(true);
      }
    }
  });

  it("ships the cluster's Lua beside its compiled library, which reads it from there", async () => {
    for (const name of LIBRARY_FILES)
      expect(tarballFiles).toContain(`dist/cluster/lua/${name}.lua`);
    const library = pathToFileURL(join(installed, 'dist', 'cluster', 'library.js')).href;
    writeFileSync(
      join(app, 'library.mjs'),
      `import { librarySource } from ${JSON.stringify(library)};\nprocess.stdout.write(librarySource());\n`,
    );
    const printed = must(await run(process.execPath, ['library.mjs'], { cwd: app }), 'library.mjs');
    expect(printed.stdout).toBe(librarySource());
  });

  it('says who it is and where it lives, and which Node it needs', () => {
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    expect(pkg.repository.url).toBe('git+https://github.com/tickwheel/tickwheel.git');
    expect(pkg.homepage).toBe('https://github.com/tickwheel/tickwheel#readme');
    expect(pkg.bugs.url).toBe('https://github.com/tickwheel/tickwheel/issues');
    // zlib.crc32 (20.15, 22.2) and require() of ES modules without a flag (20.19, 22.12).
    expect(pkg.engines.node).toBe('^20.19.0 || >=22.12.0');
  });

  it("README links work from the registry's page: shipped files, or absolute", () => {
    const readme = readFileSync(join(installed, 'README.md'), 'utf8');
    const targets = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]);
    expect(targets.length).toBeGreaterThan(10);
    for (const target of targets) {
      if (target.startsWith('#')) continue;
      const absolute =
        /^https:\/\/(github\.com|raw\.githubusercontent\.com)\/tickwheel\/tickwheel\/(?:blob\/|tree\/|raw\/)?(?:main|HEAD)\/([^?#]+)/.exec(
          target,
        );
      if (absolute !== null) {
        // Links into the repository name files that exist in it.
        expect(existsSync(join(ROOT, absolute[2])), target).toBe(true);
        continue;
      }
      if (/^https:\/\//.test(target)) continue;
      const path = target.replace(/#.*$/, '');
      expect(existsSync(join(installed, path)), `${target} is not in the package`).toBe(true);
    }
  });
});

describe('a timers-only install (npm install tickwheel)', () => {
  it('installs tickwheel and the lock addon of the queue: nothing of the server, no engine warnings', () => {
    const pkg = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
    // croner reads the cron expressions of recurring schedules (it has no dependencies).
    expect(Object.keys(pkg.dependencies)).toEqual(['croner', 'fs-native-extensions']);
    // Exactly tickwheel, croner and what fs-native-extensions brings (require-addon, bare-*, ...).
    expect(installedPackages()).toEqual(
      ['tickwheel', 'croner', ...dependencyClosure('fs-native-extensions')].sort(),
    );
    expect(installedPackages().length).toBeLessThan(10);
    for (const name of ['fastify', 'prom-client', 'commander', 'pino']) {
      expect(existsSync(join(app, 'node_modules', name)), name).toBe(false);
    }
    expect(installOutput).not.toMatch(/EBADENGINE|ERESOLVE|peer dep/i);
  });

  const USE = `
    const clock = new ManualClock();
    const timers = new TimerWheel({ clock });
    let fired = 0;
    timers.setTimeout(() => fired++, 100);
    clock.advance(250);
    // A file store: the directory lock loads fs-native-extensions' prebuilt addon.
    const queue = await DelayQueue.open({ dir: process.argv[2] });
    const { id } = await queue.schedule({ topic: 'emails', payload: { to: 'a@b.c' }, delayMs: 60000 });
    const status = (await queue.get(id)).status;
    // Without @opentelemetry/api (an optional peer, not installed): a trace context given is
    // stored and delivered all the same, and consume() runs its handler.
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await queue.schedule({ topic: 'traced', payload: 1, trace: { traceparent } });
    const traced = await new Promise((resolve) => {
      const consumer = queue.consume('traced', (message) => {
        resolve(message.trace.traceparent === traceparent);
        void consumer.close();
      });
    });
    await queue.close();
    const client = new TickwheelClient({ url: 'http://127.0.0.1:1', timeoutMs: 2000 });
    const unreachable = await client.stats().then(() => 'answered', (err) => err.name);
    const refused = await server.createServer({ dir: process.argv[2] }).then(
      () => 'created',
      (err) => [err.name, err.code, err.install].join(' '),
    );
    // tickwheel/idempotent: the PostgreSQL store needs no package of its own; the Redis store
    // names its optional peer.
    const wrapped = typeof idem.idempotent(() => undefined, {
      store: new idem.PostgresIdempotencyStore({ pool: { connect() {}, query() {} }, purgeEveryMs: 0 }),
    });
    const redisStore = await idem.RedisIdempotencyStore.open({ redis: 'redis://127.0.0.1:1' }).then(
      () => 'opened',
      (err) => [err.name, err.code, err.install, err.message.split(' needs ')[0]].join(' '),
    );
    console.log(
      JSON.stringify({ fired, status, traced, unreachable, refused, wrapped, redisStore }),
    );
  `;
  const EXPECTED = {
    fired: 1,
    status: 'scheduled',
    traced: true,
    unreachable: 'TickwheelNetworkError',
    refused:
      'TickwheelDependencyError ERR_TICKWHEEL_MISSING_DEPENDENCY npm install fastify@5 prom-client@15',
    wrapped: 'function',
    // Named as what the user opened: the idempotency store, not a queue on Valkey/Redis.
    redisStore:
      'TickwheelDependencyError ERR_TICKWHEEL_MISSING_DEPENDENCY npm install @redis/client@6 RedisIdempotencyStore (tickwheel/idempotent)',
  };

  it('works from a plain ESM script: root, queue, client; tickwheel/server says what to install', async () => {
    writeFileSync(
      join(app, 'use.mjs'),
      `import { ManualClock, TimerWheel } from 'tickwheel';
       import { DelayQueue } from 'tickwheel/queue';
       import { TickwheelClient } from 'tickwheel/client';
       import * as server from 'tickwheel/server';
       import * as idem from 'tickwheel/idempotent';
       ${USE}`,
    );
    const result = await run(process.execPath, ['use.mjs', join(work, 'esm-data')], { cwd: app });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual(EXPECTED);
  });

  it('works from CommonJS with require(), with no warning, and is the same module as for import', async () => {
    writeFileSync(
      join(app, 'use.cjs'),
      `const { ManualClock, TimerWheel } = require('tickwheel');
       const { DelayQueue } = require('tickwheel/queue');
       const { TickwheelClient } = require('tickwheel/client');
       const server = require('tickwheel/server');
       const idem = require('tickwheel/idempotent');
       (async () => {
         ${USE}
         const imported = await import('tickwheel');
         if (imported.TimerWheel !== TimerWheel) throw new Error('two copies of tickwheel');
         if (require('tickwheel/package.json').name !== 'tickwheel') throw new Error('package.json');
       })().catch((err) => { console.error(err); process.exitCode = 1; });`,
    );
    const result = await run(process.execPath, ['use.cjs', join(work, 'cjs-data')], { cwd: app });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(EXPECTED);
  });

  it('type-checks for TypeScript under node16, nodenext, bundler and node10 resolution, and from .cts', async () => {
    const ts = join(app, 'ts');
    mkdirSync(ts);
    // The expect-error lines fail the check if the types were `any`: they prove types resolved.
    writeFileSync(
      join(ts, 'use.ts'),
      `import { ManualClock, TimerWheel, type TimerHandle } from 'tickwheel';
       import { DelayQueue, MemoryStore } from 'tickwheel/queue';
       import { TickwheelClient, type MessageInfo } from 'tickwheel/client';
       import { idempotent, type IdempotencyStats } from 'tickwheel/idempotent';
       export const stats: IdempotencyStats | undefined = undefined;
       // @ts-expect-error the store is required
       idempotent(() => undefined, {});
       const timers = new TimerWheel({ clock: new ManualClock() });
       const handle: TimerHandle = timers.setTimeout(() => undefined, 10);
       timers.clearTimeout(handle);
       // @ts-expect-error a delay is a number
       timers.setTimeout(() => undefined, '10');
       export async function use(): Promise<MessageInfo | undefined> {
         const queue = await DelayQueue.open({ store: new MemoryStore() });
         await queue.schedule({ topic: 't', payload: 1 });
         // @ts-expect-error topic is required
         await queue.schedule({ payload: 1 });
         return new TickwheelClient({ url: 'http://127.0.0.1:7700' }).get('id');
       }
      `,
    );
    writeFileSync(
      join(ts, 'use.cts'),
      `import { TimerWheel } from 'tickwheel';
       import { DelayQueue } from 'tickwheel/queue';
       import { TickwheelClient } from 'tickwheel/client';
       export const made = [new TimerWheel(), DelayQueue.open, TickwheelClient];
       // @ts-expect-error not an option of TimerWheel
       new TimerWheel({ resolutionn: 1 });
      `,
    );
    // One configuration checks the package's declaration files too (skipLibCheck off), so that
    // a type of the server's peers leaking into these entry points would fail it.
    const base = {
      skipLibCheck: true,
      strict: true,
      noEmit: true,
      target: 'ES2022',
      types: ['node'],
      typeRoots: [join(ROOT, 'node_modules', '@types')],
    };
    const configs: Record<string, { compilerOptions: object; files: string[] }> = {
      node16: { compilerOptions: { ...base, module: 'node16' }, files: ['use.ts'] },
      nodenext: {
        compilerOptions: { ...base, module: 'nodenext', skipLibCheck: false },
        files: ['use.ts', 'use.cts'],
      },
      bundler: {
        compilerOptions: { ...base, module: 'esnext', moduleResolution: 'bundler' },
        files: ['use.ts'],
      },
      // Classic CommonJS projects: subpaths through typesVersions, as node10 ignores exports.
      node10: {
        compilerOptions: { ...base, module: 'commonjs', moduleResolution: 'node10' },
        files: ['use.ts'],
      },
    };
    const results = await Promise.all(
      Object.entries(configs).map(([name, config]) => {
        writeFileSync(join(ts, `tsconfig.${name}.json`), JSON.stringify(config));
        return run(process.execPath, [TSC, '-p', `tsconfig.${name}.json`], { cwd: ts });
      }),
    );
    for (const [index, name] of Object.keys(configs).entries()) {
      expect({ name, code: results[index].code, out: results[index].stdout }).toEqual({
        name,
        code: 0,
        out: '',
      });
    }
  }, 180_000);
});

describe('the tickwheel command in a timers-only install', () => {
  const bin = () => join(app, 'node_modules', '.bin', 'tickwheel');

  it('runs the client commands without the server peers', async () => {
    const version = await run(bin(), ['--version'], { cwd: app });
    expect(version).toMatchObject({ code: 0, stderr: '' });
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+/);
    const stats = await run(bin(), ['stats', '--url', 'http://127.0.0.1:1', '--timeout', '2s'], {
      cwd: app,
    });
    expect(stats.code).toBe(1);
    expect(stats.stderr).toMatch(/^tickwheel: cannot reach the server/);
  });

  it('serve fails with a named error that says exactly what to npm install', async () => {
    const serve = await run(bin(), ['serve', '--port', '0', '--dir', join(work, 'serve-data')], {
      cwd: app,
      timeoutMs: 30_000,
    });
    expect(serve.code).toBe(1);
    expect(serve.stdout).toBe('');
    expect(serve.stderr).toMatch(/ERR_TICKWHEEL_MISSING_DEPENDENCY/);
    const command = /`(npm install [^`]+)`/.exec(serve.stderr);
    expect(command?.[1]).toBe('npm install fastify@5 prom-client@15');
    peerInstall = command![1];
  });

  it('bench says plainly that it needs a clone of the repository', async () => {
    const bench = await run(bin(), ['bench', 'timers'], { cwd: app });
    expect(bench.code).toBe(1);
    expect(bench.stderr).toContain('the benchmarks ship with the tickwheel repository');
    expect(bench.stderr).toContain('git clone https://github.com/tickwheel/tickwheel.git');
    expect(bench.stdout + bench.stderr).not.toMatch(/error TS|tsc/);
  });
});

describe('after installing the peers the error names', () => {
  beforeAll(async () => {
    expect(peerInstall, 'the serve case finds the command').toBeDefined();
    const [, , ...specs] = peerInstall.split(' ');
    const install = must(
      await run('npm', ['install', ...specs, ...NPM_FLAGS], { cwd: app }),
      peerInstall,
    );
    peersInstallOutput = install.stdout + install.stderr;
  }, 240_000);

  it('installs with no engine warning on the promised Node (test/package/engines.test.ts)', () => {
    expect(peersInstallOutput).not.toMatch(/EBADENGINE|ERESOLVE/);
  });

  it('tickwheel serve serves /healthz and the client commands, and stops on SIGTERM', async () => {
    const port = await freePort();
    const served = await startServing(
      join(app, 'node_modules', '.bin', 'tickwheel'),
      ['serve', '--port', String(port), '--dir', join(work, 'peers-data')],
      { cwd: app, env: cleanEnv() },
    );
    const health = await fetch(`${served.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const sent = await run(
      join(app, 'node_modules', '.bin', 'tickwheel'),
      ['send', 'emails', '{"to":"a@b.c"}', '--delay', '1h', '--id', 'w-1', '--url', served.url],
      { cwd: app },
    );
    expect(sent.code, sent.stderr).toBe(0);
    expect(JSON.parse(sent.stdout)).toMatchObject({ id: 'w-1' });
    await stopsOnSigterm(served, port);
  });

  it('require("tickwheel/server") creates a server', async () => {
    writeFileSync(
      join(app, 'serve.cjs'),
      `const { createServer } = require('tickwheel/server');
       createServer({ dir: process.argv[2], logLevel: 'silent' }).then(async (server) => {
         const answer = await server.inject({ method: 'GET', url: '/healthz' });
         await server.close();
         console.log(answer.statusCode);
       });`,
    );
    const result = await run(process.execPath, ['serve.cjs', join(work, 'cjs-serve-data')], {
      cwd: app,
    });
    expect(result).toMatchObject({ code: 0, stdout: '200\n', stderr: '' });
  });
});

/** Splits a systemd command line into words: whitespace-separated, "..." quoted, \\ escapes. */
function systemdWords(line: string): string[] {
  const words: string[] = [];
  const pattern = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (const match of line.matchAll(pattern)) {
    words.push(match[1] === undefined ? match[2] : match[1].replace(/\\(.)/g, '$1'));
  }
  return words;
}

/** `KEY=value KEY2=value2` (systemd Environment=, Dockerfile ENV) into an object. */
function assignments(text: string): Record<string, string> {
  return Object.fromEntries(
    [...text.matchAll(/([A-Z_][A-Z0-9_]*)=(\S*)/g)].map((match) => [match[1], match[2]]),
  );
}

describe('deploy/', () => {
  it('tickwheel.service: its ExecStart serves /healthz, its ExecStartPost health check passes, SIGTERM stops it', async () => {
    const unit = readFileSync(join(ROOT, 'deploy', 'tickwheel.service'), 'utf8');
    const setting = (key: string): string[] =>
      [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((match) => match[1]);
    expect(setting('KillSignal')).toEqual(['SIGTERM']);
    expect(setting('StateDirectory')).toEqual(['tickwheel']);
    expect(unit).toContain(peerInstall.replace('npm install ', ''));

    // /opt/tickwheel is the scratch project; the state directory a temporary one.
    const dataDir = join(work, 'unit-data');
    const local = (text: string) =>
      text.replaceAll('/opt/tickwheel', app).replaceAll('/var/lib/tickwheel', dataDir);
    const [execStart] = setting('ExecStart').map((line) => systemdWords(local(line)));
    expect(execStart.slice(-1)).toEqual(['serve']);
    expect(execStart.join(' ')).not.toMatch(/\bnpm\b/);
    const environment = assignments(local(setting('Environment').join(' ')));
    expect(environment.TICKWHEEL_DIR).toBe(dataDir);
    const port = await freePort();
    const env = cleanEnv({ ...environment, TICKWHEEL_PORT: String(port) });

    const served = await startServing(execStart[0], execStart.slice(1), {
      cwd: local(setting('WorkingDirectory')[0]),
      env,
    });
    expect(existsSync(dataDir)).toBe(true);
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);
    const [healthCheck] = setting('ExecStartPost').map(systemdWords);
    const check = await run(healthCheck[0], healthCheck.slice(1), { cwd: app, env });
    expect(check, check.stderr).toMatchObject({ code: 0 });
    await stopsOnSigterm(served, port);
  }, 120_000);

  it('tickwheel.service passes systemd-analyze verify (when systemd-analyze is installed)', async (context) => {
    const probe = await run('systemd-analyze', ['--version'], { cwd: app }).catch(() => undefined);
    if (probe === undefined || probe.code !== 0) {
      context.skip();
      return;
    }
    // verify checks that the executables exist: point the unit at the scratch install.
    const unitDir = join(work, 'units');
    mkdirSync(unitDir);
    const unit = readFileSync(join(ROOT, 'deploy', 'tickwheel.service'), 'utf8');
    writeFileSync(join(unitDir, 'tickwheel.service'), unit.replaceAll('/opt/tickwheel', app));
    const verified = await run('systemd-analyze', ['verify', join(unitDir, 'tickwheel.service')], {
      cwd: unitDir,
    });
    expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('Dockerfile: its ENTRYPOINT with its ENV serves /healthz, its HEALTHCHECK passes, SIGTERM stops it', async () => {
    const dockerfile = readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8').replace(
      /\\\n/g,
      ' ',
    );
    const instruction = (name: string): string[] =>
      [...dockerfile.matchAll(new RegExp(`^${name}\\s+(.*)$`, 'gm'))].map((match) => match[1]);
    // The runtime stage is what follows the last FROM.
    const lastFrom = dockerfile.lastIndexOf('\nFROM ');
    const runtime = dockerfile.slice(lastFrom);
    expect(runtime).toContain(peerInstall.replace('npm install ', ''));
    expect(instruction('STOPSIGNAL')).toEqual(['SIGTERM']);
    expect(instruction('VOLUME')).toEqual(['/data']);

    const entrypoint = JSON.parse(instruction('ENTRYPOINT')[0]) as string[];
    const cmd = instruction('CMD').map((text) => JSON.parse(text) as string[])[0] ?? [];
    expect([...entrypoint, ...cmd].join(' ')).toBe('tickwheel serve');

    const dataDir = join(work, 'docker-data');
    const declared = assignments(
      instruction('ENV')
        .join(' ')
        .replaceAll('/app', app)
        .replaceAll('/data', dataDir)
        .replace('$PATH', process.env.PATH ?? ''),
    );
    expect(declared.PATH.split(':')[0]).toBe(join(app, 'node_modules', '.bin'));
    expect(declared.TICKWHEEL_HOST).toBe('0.0.0.0');
    const port = await freePort();
    const env = cleanEnv({ ...declared, TICKWHEEL_PORT: String(port) });
    const served = await startServing(entrypoint[0], [...entrypoint.slice(1), ...cmd], {
      cwd: app,
      env,
    });
    expect(existsSync(dataDir)).toBe(true);
    expect((await fetch(`${served.url}/healthz`)).status).toBe(200);

    const healthcheck = /CMD\s+(\[.*\])\s*$/.exec(instruction('HEALTHCHECK')[0]);
    const check = JSON.parse(healthcheck![1]) as string[];
    expect(await run(check[0], check.slice(1), { cwd: app, env })).toMatchObject({ code: 0 });
    await stopsOnSigterm(served, port, '0.0.0.0');
    expect(await run(check[0], check.slice(1), { cwd: app, env })).toMatchObject({ code: 1 });
  }, 120_000);
});
