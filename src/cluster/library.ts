/**
 * The `tickwheel` Redis Functions library (lua/*.lua, called through functions.ts): every change
 * to a partition runs there, atomically in its slot. Functions rather than EVALSHA: a library is
 * replicated and persisted with the data, so a promoted replica has it (the script cache
 * answers NOSCRIPT after a failover). Valkey loads it as one Lua chunk: the files are joined
 * after a header, and a file's `local` functions are seen only by the files after it, hence
 * the order of LIBRARY_FILES (copied to dist/ by scripts/assets.mjs).
 */

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { TickwheelStateError } from '../errors.js';
import { VISIBILITY_REASON } from '../queue/message.js';
import type { FunctionLibrary } from '../valkey/connection.js';

/**
 * Bumped whenever the library's code changes: test/cluster/library.test.ts keeps a hash of each
 * version's code and fails when the code changes under the same version.
 */
export const LIBRARY_VERSION = 7;

const LIBRARY_NAME = 'tickwheel';

const ORDER = 'leases states messages loading deliveries membership tokens recurring';
export const LIBRARY_FILES = ORDER.split(' ');

let joined: { source: string; starts: number[] } | undefined;

function join(): { source: string; starts: number[] } {
  const parts = [
    `#!lua name=${LIBRARY_NAME}\n\nlocal VERSION = ${LIBRARY_VERSION}\n` +
      `local VISIBILITY_REASON = ${JSON.stringify(VISIBILITY_REASON)}\n`,
  ];
  // The line of the joined source each file starts at (the header's is 1).
  const starts = [1];
  for (const name of LIBRARY_FILES) {
    starts.push(starts[starts.length - 1] + parts[parts.length - 1].split('\n').length);
    const file = new URL(`./lua/${name}.lua`, import.meta.url);
    try {
      parts.push(readFileSync(file, 'utf8'));
    } catch (cause) {
      const message = `the cluster's Lua ${fileURLToPath(file)} cannot be read: reinstall tickwheel`;
      throw new TickwheelStateError('ERR_TICKWHEEL_FORMAT', message, { cause });
    }
  }
  return { source: parts.join('\n'), starts };
}

export function librarySource(): string {
  return (joined ??= join()).source;
}

/** A message of Valkey's with each line of the joined source it names told as its file's. */
export function inLibraryFiles(message: string): string {
  if (!message.includes('user_function:')) return message;
  const { starts } = (joined ??= join());
  return message.replace(/user_function:(\d+)/g, (whole, text: string) => {
    const line = Number(text);
    let file = starts.length - 1;
    while (file > 0 && starts[file] > line) file--;
    if (file === 0) return whole;
    return `src/cluster/lua/${LIBRARY_FILES[file - 1]}.lua:${line - starts[file] + 1}`;
  });
}

export const LIBRARY: FunctionLibrary = {
  name: LIBRARY_NAME,
  version: LIBRARY_VERSION,
  versionFunction: 'tw_version',
  source: librarySource,
  where: inLibraryFiles,
};
