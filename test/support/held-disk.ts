/**
 * Log file operations for FileStore's `logIo` test hook: fsyncs wait while held (the group
 * commit is stuck in its fsync), and writes fail with EIO while `failing`.
 */

import type { LogIo } from '../../src/store/log/index.js';

export function heldDisk() {
  const disk = { held: false, failing: false, waiting: 0, release: () => {} };
  let gate = Promise.resolve();
  const io: Partial<LogIo> = {
    async write(handle, buffer, offset, length, position) {
      if (disk.failing) throw Object.assign(new Error('EIO: simulated'), { code: 'EIO' });
      return (await handle.write(buffer, offset, length, position)).bytesWritten;
    },
    async sync(handle) {
      if (disk.held) {
        disk.waiting++;
        await gate;
        disk.waiting--;
      }
      await handle.datasync();
    },
  };
  const hold = () => {
    disk.held = true;
    gate = new Promise<void>((resolve) => (disk.release = resolve));
  };
  const release = () => {
    disk.held = false;
    disk.release();
  };
  return { disk, io, hold, release };
}
