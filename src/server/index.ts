/**
 * `tickwheel/server`: the delay queue over HTTP, as a Fastify instance.
 *
 *   import { createServer, closeOnSignals } from 'tickwheel/server';
 *
 *   const server = await createServer({ dir: './data', token: process.env.TICKWHEEL_TOKEN });
 *   await server.listen({ port: 7700, host: '127.0.0.1' });
 *   closeOnSignals(server); // SIGTERM / SIGINT: drain, flush, close, exit
 *
 * Routes and formats: docs/http-api.md. `tickwheel serve` (the CLI) does the above.
 */

export { createServer, type ServerOptions, type TickwheelServer } from './server.js';
export { DEFAULT_BODY_LIMIT, DEFAULT_MAX_WAIT_MS, LOG_LEVELS, type LogLevel } from './settings.js';
export { closeOnSignals, type Closable, type ShutdownOptions } from './shutdown.js';
export { toErrorResponse, HttpError } from './errors.js';
export { VERSION } from './version.js';
export type * from '../client/protocol.js';
