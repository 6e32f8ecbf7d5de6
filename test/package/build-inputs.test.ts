/**
 * `npm start` builds only the parts of dist/ whose inputs changed (scripts/build-inputs.mjs):
 * on a built checkout it starts the server at once. Checked here on a small scratch tree with
 * the same layout; test/package/start.test.ts runs `npm start` itself twice.
 */

import { mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { staleParts, writeStamp } from '../../scripts/build-inputs.mjs';
import { useTempDirs } from '../support/temp-dir.js';

const tempDir = useTempDirs('build-inputs');

let root: string;

function write(path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

beforeEach(() => {
  root = tempDir();
  write('package.json', '{"name":"x"}');
  write('package-lock.json', '{}');
  write('tsconfig.json', '{}');
  write('tsconfig.build.json', '{}');
  write('src/index.ts', 'export const a = 1;');
  write('src/cli/main.ts', 'console.log(1);');
  write('dashboard/index.html', '<html></html>');
  write('dashboard/src/main.tsx', 'export {};');
  // What a finished build leaves.
  write('dist/cli/main.js', 'console.log(1);');
  write('dist/dashboard/index.html', '<html></html>');
});

describe('which parts of dist/ are stale', () => {
  it('both, with no record of a build', () => {
    expect(staleParts(root)).toEqual(['tsc', 'dashboard']);
  });

  it('none, right after a build recorded its inputs', () => {
    writeStamp(root);
    expect(staleParts(root)).toEqual([]);
  });

  it('none when only modification times changed (a checkout, a copy)', () => {
    writeStamp(root);
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(root, 'src/index.ts'), later, later);
    utimesSync(join(root, 'dashboard/index.html'), later, later);
    expect(staleParts(root)).toEqual([]);
  });

  it('the compiled sources only, when a source file changes, is added or removed', () => {
    writeStamp(root);
    write('src/index.ts', 'export const a = 2;');
    expect(staleParts(root)).toEqual(['tsc']);
    writeStamp(root);
    write('src/extra.ts', 'export {};');
    expect(staleParts(root)).toEqual(['tsc']);
    writeStamp(root);
    rmSync(join(root, 'src/extra.ts'));
    expect(staleParts(root)).toEqual(['tsc']);
  });

  it('the dashboard only, when its sources change', () => {
    writeStamp(root);
    write('dashboard/src/main.tsx', 'export const b = 1;');
    expect(staleParts(root)).toEqual(['dashboard']);
  });

  it('both, when the dependencies change', () => {
    writeStamp(root);
    write('package-lock.json', '{"lockfileVersion":3}');
    expect(staleParts(root)).toEqual(['tsc', 'dashboard']);
  });

  it('a part whose output is missing, even if its inputs did not change', () => {
    writeStamp(root);
    rmSync(join(root, 'dist/dashboard'), { recursive: true });
    expect(staleParts(root)).toEqual(['dashboard']);
  });

  it('both, when dist/ was removed with its record', () => {
    writeStamp(root);
    rmSync(join(root, 'dist'), { recursive: true });
    mkdirSync(join(root, 'dist'));
    expect(staleParts(root)).toEqual(['tsc', 'dashboard']);
  });
});
