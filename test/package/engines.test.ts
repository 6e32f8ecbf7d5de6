/**
 * Every Node the package promises (package.json `engines.node`) installs the repository's
 * locked tree without an EBADENGINE warning. npm warns for each installed package whose own
 * `engines.node` leaves out the running Node; optional packages that do are skipped silently.
 */

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const semver = createRequire(import.meta.url)('semver') as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { version: string } | null;
};

interface Locked {
  version?: string;
  optional?: boolean;
  engines?: { node?: string } | string[];
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as {
  engines: { node: string };
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(`${ROOT}package-lock.json`, 'utf8')) as {
  packages: Record<string, Locked>;
};

/** The lowest version of each `||` branch of the promised range: 20.19.0 and 22.12.0. */
const promised = pkg.engines.node
  .split('||')
  .map((branch) => semver.minVersion(branch.trim())!.version);

/** Where Node's resolution finds `name` from the package at `from` in the locked tree. */
function locate(name: string, from: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = `${dir === '' ? '' : `${dir}/`}node_modules/${name}`;
    if (lock.packages[candidate] !== undefined) return candidate;
    if (dir === '') return undefined;
    const parent = dir.lastIndexOf('/node_modules/');
    dir = parent < 0 ? '' : dir.slice(0, parent);
  }
}

/** The locked packages a user's install of tickwheel and its server peers brings. */
function userTree(): Set<string> {
  const seen = new Set<string>();
  const visit = (path: string | undefined): void => {
    if (path === undefined || seen.has(path)) return;
    seen.add(path);
    const entry = lock.packages[path];
    for (const name of Object.keys({ ...entry.dependencies, ...entry.optionalDependencies })) {
      visit(locate(name, path));
    }
  };
  for (const name of Object.keys({ ...pkg.dependencies, ...pkg.peerDependencies })) {
    visit(locate(name, ''));
  }
  return seen;
}

/** The packages of `paths` that npm would install with an EBADENGINE warning on `node`. */
function unsupported(paths: Iterable<string>, node: string): string[] {
  const found: string[] = [];
  for (const path of paths) {
    const entry = lock.packages[path];
    if (path === '' || entry.optional === true) continue;
    const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
    if (range !== undefined && !semver.satisfies(node, range)) {
      found.push(`${path}@${entry.version} requires node ${range}, not ${node}`);
    }
  }
  return found;
}

describe('engines', () => {
  it('promises Node 20.19+ and 22.12+', () => {
    expect(promised).toEqual(['20.19.0', '22.12.0']);
  });

  it('npm ci of the repository on Node 20.19 installs no package that refuses it', () => {
    expect(unsupported(Object.keys(lock.packages), '20.19.0')).toEqual([]);
  });

  it('the package, its dependencies and its server peers support every promised Node', () => {
    const tree = userTree();
    expect(tree.has('node_modules/fastify')).toBe(true);
    expect(tree.has('node_modules/light-my-request')).toBe(true);
    expect(promised.flatMap((node) => unsupported(tree, node))).toEqual([]);
  });
});
