/**
 * The `tickwheel` Redis Functions library: every change the cluster makes to a partition runs
 * here, atomically in the partition's slot (docs/cluster.md, "Life of a message").
 *
 * Functions rather than EVALSHA: a library is replicated and persisted with the data, so a
 * promoted replica has it; the script cache is neither, and answers NOSCRIPT after a failover.
 * Every node loads the library with FUNCTION LOAD REPLACE on each primary at start; the library
 * answers `tw_version` so that a node never runs beside a newer library than its own.
 *
 * Time inside functions is the server's (TIME): leases expire by the server's clock only, so
 * nodes' clocks never decide who owns a partition.
 *
 * Valkey loads a library as one Lua chunk, so the fragments in lua/ (one concern each, their
 * functions' contracts beside them) are joined here into one source: a fragment's `local`
 * functions are seen by the fragments after it, which is why their order is fixed.
 */

import { DELIVERIES } from './lua/deliveries.js';
import { LEASES, MEMBERSHIP } from './lua/leases.js';
import { LOADING } from './lua/loading.js';
import { MESSAGES, MOVES, RECORD } from './lua/messages.js';
import { RECURRING } from './lua/recurring.js';
import { STATES } from './lua/states.js';
import { TOKENS } from './lua/tokens.js';

/**
 * Bumped whenever a function changes what it does. 13: tw_expire keeps the embedded queue's
 * reason text for a visibility timeout; tw_cancel tells what it cancelled when asked.
 */
export const LIBRARY_VERSION = 13;

export const LIBRARY_NAME = 'tickwheel';

const REGISTRATIONS = `
redis.register_function{function_name = 'tw_version', callback = function() return VERSION end,
  flags = {'no-writes'}}
redis.register_function{function_name = 'tw_lease', callback = lease}
redis.register_function{function_name = 'tw_config', callback = config}
redis.register_function{function_name = 'tw_heartbeat', callback = heartbeat}
redis.register_function{function_name = 'tw_tokens', callback = tokens}
redis.register_function{function_name = 'tw_holds', callback = fenced_check, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_schedule', callback = schedule}
redis.register_function{function_name = 'tw_schedule_once', callback = schedule_once}
redis.register_function{function_name = 'tw_sched', callback = sched}
redis.register_function{function_name = 'tw_get', callback = get, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_cancel', callback = cancel}
redis.register_function{function_name = 'tw_read', callback = read, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_record', callback = record_of, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_load', callback = load}
redis.register_function{function_name = 'tw_fire', callback = fire}
redis.register_function{function_name = 'tw_take', callback = take}
redis.register_function{function_name = 'tw_ack', callback = ack}
redis.register_function{function_name = 'tw_nack', callback = nack}
redis.register_function{function_name = 'tw_overdue', callback = overdue, flags = {'no-writes'}}
redis.register_function{function_name = 'tw_expire', callback = expire}
redis.register_function{function_name = 'tw_reschedule', callback = reschedule}
redis.register_function{function_name = 'tw_requeue', callback = requeue}
`;

export const LIBRARY_SOURCE = [
  `#!lua name=${LIBRARY_NAME}\n\nlocal VERSION = ${LIBRARY_VERSION}\n`,
  LEASES,
  STATES,
  MESSAGES,
  LOADING,
  DELIVERIES,
  MOVES,
  MEMBERSHIP,
  TOKENS,
  RECORD,
  RECURRING,
  REGISTRATIONS,
].join('');
