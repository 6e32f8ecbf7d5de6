/**
 * Where the PostgreSQL peers' packages come from: the project's node_modules first, then the
 * folder named by TICKWHEEL_BENCH_DEPS (one where `npm install pg pg-boss@10
 * graphile-worker@0.17` was run), for machines where they cannot be devDependencies. None of
 * them is a dependency of tickwheel.
 */

import { createRequire } from 'node:module';
import { join } from 'node:path';
import { URL, fileURLToPath } from 'node:url';

const INSTALL_HINT =
  'set TICKWHEEL_BENCH_DEPS to a folder where `npm install pg pg-boss@10 graphile-worker@0.17` ' +
  'was run (bench/README.md, "PostgreSQL peers")';

function requirers() {
  const bases = [fileURLToPath(new URL('../../package.json', import.meta.url))];
  if (process.env.TICKWHEEL_BENCH_DEPS) {
    bases.push(join(process.env.TICKWHEEL_BENCH_DEPS, 'package.json'));
  }
  return bases.map((base) => createRequire(base));
}

/** { module, version } of package `name`, or { missing: why } when it cannot be loaded here. */
export function findPackage(name) {
  const failures = [];
  for (const require of requirers()) {
    try {
      const module = require(name);
      const version = require(`${name}/package.json`).version;
      return { module, version };
    } catch (err) {
      failures.push(err.code ?? err.message);
    }
  }
  return { missing: `${name} cannot be loaded (${failures.join(', ')}): ${INSTALL_HINT}` };
}

/** The module of package `name`; throws with what to install when it is missing. */
export function loadPackage(name) {
  const found = findPackage(name);
  if (found.missing !== undefined) throw new Error(found.missing);
  return found.module;
}
