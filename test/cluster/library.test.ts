/**
 * The tickwheel Functions library as a whole (src/cluster/library.ts, src/cluster/lua/*.lua):
 * its code never changes under a version already given out, and Valkey's messages about it
 * name the file and line to look at, not a line of the joined source.
 */

import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as tw from '../../src/cluster/functions.js';
import { metaKey } from '../../src/cluster/keys.js';
import {
  LIBRARY_FILES,
  LIBRARY_VERSION,
  inLibraryFiles,
  librarySource,
} from '../../src/cluster/library.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { installed } from '../../scripts/valkey.mjs';
import { useTempDirs } from '../support/temp-dir.js';
import { withValkey } from './with-valkey.js';
import { codeHash } from '../support/code-hash.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The code of each library version (its lines less blank and comment-only ones, hashed). A node
 * loads its library over an older one and refuses to run beside a newer one, so two libraries
 * with one version but different code would run under nodes that expect either: a change of
 * code takes a new LIBRARY_VERSION, and its hash added here.
 */
const CODE_HASHES: Record<number, string> = {
  1: 'c94198fe65b2d29b',
  2: 'e45e940dd15ad115',
  3: '10a5d00f7fd63123',
  4: 'f022e5d0487bfd56',
  5: '1dd03d333263dc70',
  6: 'bd9da6fdd4d15991',
  7: 'a60a8ffdcfe67381',
};

describe('the tickwheel library', () => {
  it('changes its code only with a new LIBRARY_VERSION', () => {
    const hash = codeHash(librarySource());
    const recorded = CODE_HASHES[LIBRARY_VERSION];
    const advice =
      recorded === undefined
        ? `record version ${LIBRARY_VERSION}'s hash in CODE_HASHES here: '${hash}'`
        : `the Lua changed under version ${LIBRARY_VERSION}: bump LIBRARY_VERSION in ` +
          `src/cluster/library.ts and record the new version's hash here: '${hash}'`;
    expect(hash, advice).toBe(recorded);
  });

  it('tells a line of the joined source as its file and line', () => {
    const joined = librarySource().split('\n');
    for (const name of LIBRARY_FILES) {
      const path = `src/cluster/lua/${name}.lua`;
      const lines = readFileSync(path, 'utf8').split('\n');
      // The file's first function: a line that is nowhere else in the library.
      const inFile = lines.findIndex((line) => line.startsWith('local function '));
      const inJoined = joined.indexOf(lines[inFile]);
      expect(inLibraryFiles(`ERR user_function:${inJoined + 1}: x`)).toBe(
        `ERR ${path}:${inFile + 1}: x`,
      );
    }
    // The header (name, version) is no file's.
    expect(inLibraryFiles('user_function:3: x')).toBe('user_function:3: x');
  });
});

describe('the tickwheel library as built', () => {
  const tempDir = useTempDirs('library');

  it('refuses with ERR_TICKWHEEL_FORMAT, naming the file, when a build lacks one of its Lua files', () => {
    const copy = tempDir();
    cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true });
    writeFileSync(join(copy, 'package.json'), '{"type":"module"}');
    rmSync(join(copy, 'dist', 'cluster', 'lua', 'tokens.lua'));
    const library = pathToFileURL(join(copy, 'dist', 'cluster', 'library.js')).href;
    const script = `import(${JSON.stringify(library)}).then((m) => m.librarySource()).then(
      () => console.log('loaded'),
      (err) => console.log(err.code, err.message),
    );`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    expect(run.stdout).toMatch(
      /^ERR_TICKWHEEL_FORMAT the cluster's Lua .*tokens\.lua cannot be read/,
    );
  });
});

describe.runIf(installed('valkey-server'))('the tickwheel library on Valkey', () => {
  const servers = withValkey();

  it("names a syntax error's file and line when Valkey refuses to load the library", async () => {
    const broken = librarySource().replace('local granted = 0', 'local granted = = 0');
    expect(broken).not.toBe(librarySource());
    const refused = await servers.valkey.command('x', ['FUNCTION', 'LOAD', 'REPLACE', broken]).then(
      () => undefined,
      (err: Error) => err.message,
    );
    expect(inLibraryFiles(String(refused))).toMatch(/src\/cluster\/lua\/tokens\.lua:\d+: /);
  });

  it("names a function's run-time error by its file and line", async () => {
    // A count that is not a number (past the types): comparing with it fails inside tw_take.
    await expect(
      tw.take(servers.valkey, metaKey('q', 0), 't', 'x' as unknown as number, 1_000, 1_000),
    ).rejects.toThrow(/src\/cluster\/lua\/deliveries\.lua:\d+: /);
  });
});
