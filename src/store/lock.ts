/**
 * One process per data directory: a LOCK file holding the owner's pid, created exclusively.
 * A lock left by a process that no longer exists (killed, crashed) is taken over; a lock held
 * by a live process, this one included, is refused with ERR_TICKWHEEL_LOCKED.
 */

import { open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { TickwheelStateError } from '../errors.js';

const heldHere = new Set<string>();

export interface DirectoryLock {
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function locked(dir: string, pid: number | string): TickwheelStateError {
  return new TickwheelStateError(
    'ERR_TICKWHEEL_LOCKED',
    `${dir} is in use by process ${pid}; one process at a time may open a data directory`,
  );
}

export async function lockDirectory(dir: string): Promise<DirectoryLock> {
  const file = join(dir, 'LOCK');
  if (heldHere.has(file)) throw locked(dir, `${process.pid} (this process)`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.sync();
      await handle.close();
      heldHere.add(file);
      return {
        release: async () => {
          heldHere.delete(file);
          await rm(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const owner = Number.parseInt(await readFile(file, 'utf8').catch(() => ''), 10);
      if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && alive(owner)) {
        throw locked(dir, owner);
      }
      // Left by a process that is gone: take it over.
      await rm(file, { force: true });
    }
  }
  throw locked(dir, 'unknown');
}
