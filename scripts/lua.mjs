/**
 * The cluster's Lua (src/cluster/lua/*.lua, the Functions library that src/cluster/library.ts
 * joins and loads; scripts/assets.mjs copies it into dist/).
 *
 *   node scripts/lua.mjs check   checks each file's syntax with luac -p (Lua 5.1, as Valkey and
 *                                Redis run it); an error names the file and the line
 */

import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCE = 'src/cluster/lua';

function luaFiles(root) {
  return readdirSync(join(root, SOURCE))
    .filter((name) => name.endsWith('.lua'))
    .sort();
}

/** Exit status 0 when every file parses; 1 with luac's message otherwise, or without luac. */
function check(root) {
  const luac = ['luac5.1', 'luac'].find(
    (name) => spawnSync(name, ['-v'], { stdio: 'ignore' }).error === undefined,
  );
  if (luac === undefined) {
    console.error('luac (Lua 5.1) is not installed: apt-get install lua5.1');
    return 1;
  }
  let failed = 0;
  for (const name of luaFiles(root)) {
    const result = spawnSync(luac, ['-p', join(SOURCE, name)], { cwd: root, encoding: 'utf8' });
    if (result.status !== 0) {
      failed++;
      process.stderr.write(result.stderr);
    }
  }
  console.log(
    `${luac} -p: ${luaFiles(root).length - failed} of ${luaFiles(root).length} files parse`,
  );
  return failed === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = dirname(dirname(fileURLToPath(import.meta.url)));
  const command = process.argv[2];
  if (command === 'check') process.exit(check(root));
  else {
    console.error('usage: node scripts/lua.mjs check');
    process.exit(2);
  }
}
