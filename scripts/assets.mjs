/**
 * The files the compiled code reads beside itself, copied from src/ into dist/: the cluster's
 * Functions library (src/cluster/lua/*.lua, joined and loaded by src/cluster/library.ts) and the
 * PostgreSQL schema (src/postgres/sql/*.sql, installed by src/postgres/install.ts).
 *
 *   node scripts/assets.mjs copy    the build and `npm start`'s build run it
 */

import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Each folder of src/ whose files of that ending dist/ needs, at the same place. */
const ASSETS = [
  ['cluster/lua', '.lua'],
  ['postgres/sql', '.sql'],
];

export function copyAssets(root) {
  for (const [folder, ending] of ASSETS) {
    const source = join(root, 'src', folder);
    const target = join(root, 'dist', folder);
    mkdirSync(target, { recursive: true });
    for (const name of readdirSync(source).filter((file) => file.endsWith(ending))) {
      copyFileSync(join(source, name), join(target, name));
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2] !== 'copy') {
    console.error('usage: node scripts/assets.mjs copy');
    process.exit(2);
  }
  copyAssets(dirname(dirname(fileURLToPath(import.meta.url))));
}
