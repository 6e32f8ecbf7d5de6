/** `tickwheel bench`: runs the benchmark suites of a clone, or says where to get them. */

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CliError, type CliIo } from './io.js';

const SUITES = ['timers', 'queue', 'http'] as const;

/** The package root: two levels up from src/cli or dist/cli. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

const REPOSITORY_URL = 'https://github.com/tickwheel/tickwheel';

/** Whether `root` is a clone of the repository: it has the suites and the build's config. */
function isClone(root: string): boolean {
  return existsSync(`${root}bench`) && existsSync(`${root}tsconfig.build.json`);
}

async function scripts(root: string): Promise<Record<string, string>> {
  try {
    const pkg = JSON.parse(await readFile(`${root}package.json`, 'utf8'));
    return (pkg.scripts ?? {}) as Record<string, string>;
  } catch {
    return {};
  }
}

function run(root: string, script: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', script, ...(args.length > 0 ? ['--', ...args] : [])], {
      cwd: root,
      stdio: 'inherit',
      shell: process.platform === 'win32',
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)));
  });
}

export async function bench(
  suites: string[],
  args: string[],
  options: { list?: boolean; root?: string },
  io: CliIo,
): Promise<void> {
  const root = options.root ?? PACKAGE_ROOT;
  const clone = isClone(root);
  const known = clone ? await scripts(root) : {};
  const chosen = suites.length === 0 ? [...SUITES] : suites;
  for (const suite of chosen) {
    if (!(SUITES as readonly string[]).includes(suite)) {
      throw new CliError(`unknown suite ${suite}; the suites are ${SUITES.join(', ')}`);
    }
  }
  if (options.list === true) {
    for (const suite of SUITES) {
      const script = known[`bench:${suite}`];
      io.out(
        `${suite.padEnd(8)}${script === undefined ? '(not available here: needs a clone of the repository)' : `npm run bench:${suite}: ${script}`}\n`,
      );
    }
    return;
  }
  if (!clone) {
    throw new CliError(
      `the benchmarks ship with the tickwheel repository, not with the npm package (${root} ` +
        `has no bench/). Run them from a clone: git clone ${REPOSITORY_URL}.git, then in it ` +
        `npm ci && ${chosen.map((suite) => `npm run bench:${suite}`).join(' && ')}`,
    );
  }
  const missing = chosen.filter((suite) => known[`bench:${suite}`] === undefined);
  if (missing.length > 0) {
    throw new CliError(
      `no npm script ${missing.map((suite) => `bench:${suite}`).join(', ')} in ${root}package.json; ` +
        'the benchmarks ship with the tickwheel repository, not the npm package: run this from a clone',
    );
  }
  for (const suite of chosen) {
    io.err(`tickwheel bench: npm run bench:${suite}\n`);
    const code = await run(root, `bench:${suite}`, args);
    if (code !== 0) throw new CliError(`bench:${suite} failed (exit status ${code})`, code);
  }
}
