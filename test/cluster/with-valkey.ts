/**
 * One standalone Valkey with the tickwheel library loaded, for the tests of a describe block:
 * started before them, stopped after. Read `valkey` inside tests (it is set by then). And the
 * driver a node makes over a connection, for tests that drive a part of the engine directly.
 */

import { afterAll, beforeAll } from 'vitest';
import { ValkeyDriver } from '../../src/cluster/driver.js';
import type { Durability } from '../../src/cluster/durability.js';
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

/** A queue's driver on one connection (its writes too), with the durability given as set. */
export function valkeyDriver(
  valkey: Valkey,
  queue: string,
  durability: Durability = 'async',
  durabilityTimeoutMs?: number,
  onError?: (err: Error) => void,
): ValkeyDriver {
  return new ValkeyDriver(valkey, valkey, {
    queue,
    durability,
    durabilityOption: durability,
    durabilityReason: 'as set',
    ...(durabilityTimeoutMs === undefined ? {} : { durabilityTimeoutMs }),
    ...(onError === undefined ? {} : { onError }),
  });
}
