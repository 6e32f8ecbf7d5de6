/**
 * Global setup of the test projects that run dist/ (child processes, the CLI, the dashboard
 * bundle, the packed tarball): builds the parts of dist/ whose inputs changed, nothing when it
 * is current. The unit project has no such setup, so it runs on a clone that was never built.
 */

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export default function setup(): void {
  const result = spawnSync(process.execPath, ['scripts/build-inputs.mjs', 'build'], {
    cwd: root,
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error(`building dist/ failed (exit ${result.status})`);
}
