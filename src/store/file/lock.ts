/**
 * One process per data directory, enforced by the kernel.
 *
 * The owner holds an exclusive advisory lock on `LOCK` for as long as it has the file open:
 * an open-file-description lock on Linux (`F_OFD_SETLK`), `flock` on macOS, `LockFileEx` on
 * Windows (through the `fs-native-extensions` addon, which ships prebuilt binaries). The kernel
 * drops the lock when the owner closes the file or dies, however it dies, so:
 *
 * - a lock can never be taken over while its holder lives, whatever the holder's pid looks like
 *   from here (containers in other PID namespaces sharing a volume see different pids);
 * - two processes opening at the same instant cannot both win: taking the lock is one atomic
 *   system call, not "create, then write a pid";
 * - a LOCK file left behind by a killed process is simply locked again: no pid is trusted.
 *
 * The file is never deleted. Deleting it would let a third process create a fresh LOCK and lock
 * that while a second one still holds the old, unlinked file. The pid written into it after
 * locking is for people and error messages only.
 *
 * Someone may delete it all the same (a cleanup script, a person who takes it for a stale pid
 * file). The holder then still holds its lock, on a file no longer in the directory, and the
 * next process to open the directory creates and locks a new LOCK: two writers. So the holder
 * checks that the path still names the very file it locked (device and inode, `check()`), at
 * each checkpoint and before each new log segment, and stops (LockLostError) once it does not.
 */

import { open, stat, type FileHandle } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { TickwheelUnavailableError } from '../../errors.js';
import { faultOf, warnFault } from '../../queue/faults.js';
import { DATA_FILE_MODE } from '../log/index.js';

interface NativeLocks {
  tryLock(fd: number): boolean;
  unlock(fd: number): void;
}

let native: NativeLocks | undefined;

function nativeLocks(): NativeLocks {
  native ??= createRequire(import.meta.url)('fs-native-extensions') as NativeLocks;
  return native;
}

/** Files locked by this process: a second open here gets the same clear error. */
const heldHere = new Set<string>();

export interface DirectoryLock {
  release(): Promise<void>;
  /**
   * Rejects with LockLostError if `LOCK` is gone or is another file than the one locked, and
   * from then on (the loss is told once, to the store's faults: the queue's onFault). An error that keeps it from
   * telling (the stat itself failing) is not a loss: it resolves, and the next check tells.
   */
  check(): Promise<void>;
  /** The loss found by check(), if one was. */
  readonly lost: LockLostError | undefined;
}

/**
 * The data directory's LOCK file was deleted or replaced while the queue had it open: another
 * process may have opened the directory since, so this one takes no more changes.
 */
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

/**
 * Locks `dir`; a loss check() finds later is told once to `faults` (the queue's onFault, see
 * StoreFaults), process warnings when none is given.
 */
export async function lockDirectory(
  dir: string,
  faults: { report(err: unknown): void } = { report: (err) => warnFault(faultOf(err)) },
): Promise<DirectoryLock> {
  const file = join(dir, 'LOCK');
  if (heldHere.has(file)) throw locked(dir, `process ${process.pid} (this process)`);
  const locks = nativeLocks();
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
      // Closing the file releases the kernel's lock; the file stays (see above).
      await handle.close();
    },
  };
}
