/**
 * One standalone Valkey with the tickwheel library loaded, for the tests of a describe block:
 * started before them, stopped after. Read `valkey` inside tests (it is set by then).
 */

import { afterAll, beforeAll } from 'vitest';
import { ClusterValkey as Valkey } from '../../src/cluster/functions.js';
// @ts-expect-error: a plain JavaScript module of the project's scripts.
import { startServer } from '../../scripts/valkey.mjs';

export function withValkey(): { readonly valkey: Valkey } {
  let server: { url: string; stop(): Promise<void> } | undefined;
  let valkey: Valkey | undefined;
  beforeAll(async () => {
    server = await startServer({ binary: 'valkey-server' });
    valkey = await Valkey.connect(server!.url);
    await valkey.loadLibrary();
  }, 30_000);
  afterAll(async () => {
    await valkey?.close();
    await server?.stop();
  });
  return {
    get valkey(): Valkey {
      if (valkey === undefined) throw new Error('Valkey is not started yet');
      return valkey;
    },
  };
}
