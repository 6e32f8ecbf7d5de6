/**
 * CPU time of a PostgreSQL server, every process of it: the postmaster is the parent of all the
 * others (backends, checkpointer, walwriter, autovacuum), so its own time, the time of its
 * children that have exited and been waited for (cutime, cstime) and the time of those alive now
 * add up to everything the server has spent. A backend that ends between two readings moves from
 * the third term to the second, so nothing is lost or counted twice. Linux /proc only; null where
 * it cannot be read.
 */

import { readFileSync, readdirSync } from 'node:fs';

/** USER_HZ: /proc counts in hundredths of a second on Linux whatever the kernel's HZ. */
const TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>/stat from the third (state) on, or undefined if it is gone. */
function statFields(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: the fields start after its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

// Counted from the state (field 3 of stat(5)): ppid 4, utime 14, stime 15, cutime 16, cstime 17.
const PPID = 1;
const UTIME = 11;
const STIME = 12;
const CUTIME = 13;
const CSTIME = 14;

/** CPU seconds the server under postmaster `pid` has used so far, or null. */
export function serverCpuSeconds(pid) {
  const own = statFields(pid);
  if (own === undefined) return null;
  let ticks = Number(own[UTIME]) + Number(own[STIME]) + Number(own[CUTIME]) + Number(own[CSTIME]);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const fields = statFields(entry);
    if (fields !== undefined && Number(fields[PPID]) === pid) {
      ticks += Number(fields[UTIME]) + Number(fields[STIME]);
    }
  }
  return ticks / TICKS_PER_SECOND;
}

/** This process's CPU seconds (user + system). */
export function processCpuSeconds() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/**
 * Starts a CPU reading of this process and the server; stop(messages) gives the milliseconds
 * each spent and per message.
 */
export function cpuMeter(serverPid) {
  const node = processCpuSeconds();
  const server = serverPid === undefined ? null : serverCpuSeconds(serverPid);
  return {
    stop(messages) {
      const nodeMs = (processCpuSeconds() - node) * 1000;
      const serverNow = serverPid === undefined ? null : serverCpuSeconds(serverPid);
      const serverMs = server === null || serverNow === null ? null : (serverNow - server) * 1000;
      const per = (ms) => (ms === null || messages <= 0 ? null : round3(ms / messages));
      return {
        nodeMs: Math.round(nodeMs),
        postgresMs: serverMs === null ? null : Math.round(serverMs),
        nodeMsPerMessage: per(nodeMs),
        postgresMsPerMessage: per(serverMs),
      };
    },
  };
}

function round3(value) {
  return Math.round(value * 1000) / 1000;
}
