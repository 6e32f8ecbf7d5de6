/**
 * One process per data directory: an exclusive advisory lock on `LOCK` that the kernel holds
 * while the file is open (`fs-native-extensions`), dropped when its holder closes it or dies,
 * taken by one of two racing openers. The file is never deleted (a third process could lock a
 * new one while a second holds the old); if someone deletes or replaces it all the same,
 * check() (at each checkpoint and new segment) finds out and the store stops with LockLostError.
 */

import { open, stat, type FileHandle } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { TickwheelUnavailableError } from '../../errors.js';
import { DATA_FILE_MODE } from '../log/index.js';

interface NativeLocks {
  tryLock(fd: number): boolean;
  unlock(fd: number): void;
}

let native: NativeLocks | undefined;

/** Files locked by this process: a second open here gets the same clear error. */
const heldHere = new Set<string>();

export interface DirectoryLock {
  release(): Promise<void>;
  /**
   * Rejects with LockLostError if `LOCK` is gone or another file, and from then on (told once
   * to the faults). A failing stat is not a loss: the next check tells.
   */
  check(): Promise<void>;
  readonly lost: LockLostError | undefined;
}

/** LOCK was deleted or replaced while open: another process may own the directory now. */
export class LockLostError extends TickwheelUnavailableError {
  constructor(dir: string, what: string) {
    super(
      'ERR_TICKWHEEL_LOCK_LOST',
      `${join(dir, 'LOCK')} ${what} while this process had the directory open, so another ` +
        'process may be writing it now: this queue takes no more changes. What it acknowledged ' +
        'is on disk. Stop every process using the directory, then open it again from one; ' +
        'never delete LOCK (the kernel frees it when its holder exits)',
    );
    this.name = 'LockLostError';
  }
}

function locked(dir: string, owner: string): TickwheelUnavailableError {
  return new TickwheelUnavailableError(
    'ERR_TICKWHEEL_LOCKED',
    `${dir} is in use by ${owner}; one process at a time may open a data directory`,
  );
}

async function ownerOf(handle: FileHandle): Promise<string> {
  const text = await handle.readFile('utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? `process ${pid}` : 'another process';
}

/** Locks `dir`; a loss check() finds later is told once to `faults` (the queue's onFault). */
export async function lockDirectory(
  dir: string,
  faults: { report(err: unknown): void },
): Promise<DirectoryLock> {
  const file = join(dir, 'LOCK');
  if (heldHere.has(file)) throw locked(dir, `process ${process.pid} (this process)`);
  const locks = (native ??= createRequire(import.meta.url)('fs-native-extensions') as NativeLocks);
  // 'a+' creates the file if needed and never truncates a file someone else may hold.
  const handle = await open(file, 'a+', DATA_FILE_MODE);
  let held = false;
  let identity: { dev: number; ino: number };
  try {
    if (!locks.tryLock(handle.fd)) throw locked(dir, await ownerOf(handle));
    held = true;
    heldHere.add(file);
    await handle.truncate(0);
    await handle.write(`${process.pid}\n`, 0);
    await handle.sync();
    identity = await handle.stat();
  } catch (err) {
    if (held) {
      heldHere.delete(file);
      locks.unlock(handle.fd);
    }
    await handle.close();
    throw err;
  }
  let released = false;
  let lost: LockLostError | undefined;
  const lose = (what: string): never => {
    lost = new LockLostError(dir, what);
    faults.report(lost);
    throw lost;
  };
  return {
    get lost() {
      return lost;
    },
    check: async () => {
      if (lost !== undefined) throw lost;
      let now;
      try {
        now = await stat(file);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') lose('was deleted');
        return;
      }
      if (lost === undefined && (now.dev !== identity.dev || now.ino !== identity.ino)) {
        lose('was replaced by another file');
      }
    },
    release: async () => {
      if (released) return;
      released = true;
      heldHere.delete(file);
      await handle.close();
    },
  };
}
