/**
 * Whether dist/ is current, so that `npm start` on a built checkout starts at once.
 *
 * dist/ has two parts, each built from its own inputs: the compiled sources (tsc) and the
 * dashboard bundle (vite). A build records a hash of each part's inputs in dist/ (the stamp);
 * a part is stale when its inputs hash differently, or its entry file is missing. Hashes of
 * content, not modification times, so that a checkout or a copy that only touches times
 * rebuilds nothing. The stamp lives in dist/, so removing dist/ makes both parts stale.
 *
 *   node scripts/build-inputs.mjs stamp   records the inputs of a build that just finished
 *   node scripts/build-inputs.mjs build   builds the stale parts only (tsc incrementally, with
 *                                         its build info in dist/, and the files it reads
 *                                         copied beside it: scripts/assets.mjs), then records
 *                                         the stamp
 */

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { copyAssets } from './assets.mjs';

export const STAMP = 'dist/.build-inputs.json';

/** What each part is built from (files or folders), and the file a finished build leaves. */
export const PARTS = {
  tsc: {
    inputs: ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'],
    output: 'dist/cli/main.js',
  },
  dashboard: {
    inputs: ['dashboard', 'package.json', 'package-lock.json'],
    output: 'dist/dashboard/index.html',
  },
};

function filesOf(root, input) {
  const path = join(root, input);
  if (!existsSync(path)) return [];
  const entries = readdirSync(path, { recursive: true, withFileTypes: true }).filter((entry) =>
    entry.isFile(),
  );
  return entries.map((entry) => relative(root, join(entry.parentPath, entry.name)));
}

function isFolder(root, input) {
  try {
    readdirSync(join(root, input));
    return true;
  } catch {
    return false;
  }
}

/** A hash of the names and contents of a part's inputs. */
export function inputsHash(root, part) {
  const hash = createHash('sha256');
  const files = PARTS[part].inputs
    .flatMap((input) =>
      isFolder(root, input) ? filesOf(root, input) : existsSync(join(root, input)) ? [input] : [],
    )
    .map((file) => file.split('\\').join('/'))
    .sort();
  for (const file of files) {
    hash.update(`${file}\0`);
    hash.update(readFileSync(join(root, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

export function currentHashes(root) {
  return Object.fromEntries(Object.keys(PARTS).map((part) => [part, inputsHash(root, part)]));
}

function readStamp(root) {
  try {
    return JSON.parse(readFileSync(join(root, STAMP), 'utf8'));
  } catch {
    return {};
  }
}

/** The parts of dist/ that do not match their inputs, e.g. `['dashboard']`; `[]` if current. */
export function staleParts(root, hashes = currentHashes(root)) {
  const stamp = readStamp(root);
  return Object.keys(PARTS).filter(
    (part) => stamp[part] !== hashes[part] || !existsSync(join(root, PARTS[part].output)),
  );
}

export function writeStamp(root, hashes = currentHashes(root)) {
  writeFileSync(join(root, STAMP), `${JSON.stringify(hashes, null, 2)}\n`);
}

function run(root, script, args) {
  const result = spawnSync(process.execPath, [join(root, script), ...args], {
    cwd: root,
    stdio: 'inherit',
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function buildStale(root) {
  // Hashed before building: a file changed during the build makes the next start build again.
  const hashes = currentHashes(root);
  const stale = staleParts(root, hashes);
  if (stale.length === 0) {
    console.log('dist/ is current: nothing to build');
    return;
  }
  console.log(`building ${stale.join(' and ')} (inputs changed since the last build)`);
  if (stale.includes('tsc')) {
    run(root, 'node_modules/typescript/bin/tsc', ['-p', 'tsconfig.build.json']);
    copyAssets(root);
  }
  if (stale.includes('dashboard')) {
    run(root, 'node_modules/vite/bin/vite.js', [
      'build',
      '--config',
      'dashboard/vite.config.ts',
      '--logLevel',
      'warn',
    ]);
  }
  writeStamp(root, hashes);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = dirname(dirname(fileURLToPath(import.meta.url)));
  const command = process.argv[2];
  if (command === 'stamp') writeStamp(root);
  else if (command === 'build') buildStale(root);
  else {
    console.error('usage: node scripts/build-inputs.mjs stamp|build');
    process.exit(2);
  }
}
