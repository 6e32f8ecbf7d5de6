/**
 * `tickwheel/server`: the delay queue over HTTP, as a Fastify instance (docs/http-api.md).
 * fastify and prom-client are optional peer dependencies: this module loads without them, and
 * createServer() rejects with a TickwheelDependencyError that says what to install.
 */

import { checkServerPeers } from './peers.js';
import type { ServerOptions } from './options.js';
import type { TickwheelServer } from './server.js';

export type { ServerOptions, TickwheelServer };

/**
 * Opens the queue (or uses `options.queue`) and builds the server; call listen() on it.
 * Rejects with ERR_TICKWHEEL_MISSING_DEPENDENCY when fastify or prom-client is missing.
 */
export async function createServer(options?: ServerOptions): Promise<TickwheelServer> {
  checkServerPeers();
  // Imported only now: a static import would fail to link without the peers, before any check.
  return (await import('./server.js')).createServer(options);
}

export { TickwheelDependencyError } from '../errors.js';
export { DEFAULT_BODY_LIMIT, DEFAULT_MAX_WAIT_MS, LOG_LEVELS, type LogLevel } from './settings.js';
export { closeOnSignals, type Closable, type ShutdownOptions } from './shutdown.js';
export { toErrorResponse, HttpError } from './errors.js';
export { VERSION } from './version.js';
export type * from '../protocol/wire.js';
export type * from '../protocol/limits.js';
