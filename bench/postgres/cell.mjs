/**
 * One cell of the PostgreSQL peers' benchmark: one workload on one peer, on a database of its
 * own, in a process of its own (forked by run.mjs with --expose-gc), so that RSS and CPU belong
 * to that cell alone.
 *
 * Protocol: the runner sends { peer, cell, options, url, postgresPid }; the cell answers with any
 * number of { type: 'progress', text }, then one { type: 'result', result } or
 * { type: 'error', message }, and exits.
 */

import { send, serveCell } from '../cell-process.mjs';
import { CELLS } from './workloads.mjs';

const PEERS = {
  tickwheel: () => import('./tickwheel-peer.mjs'),
  'pg-boss': () => import('./pg-boss-peer.mjs'),
  graphile: () => import('./graphile-peer.mjs'),
};

async function run({ peer: peerName, cell, options, url, postgresPid }) {
  const workload = CELLS[cell];
  if (workload === undefined) throw new Error(`unknown cell ${cell}`);
  const module = await PEERS[peerName]();
  const openedAt = performance.now();
  const peer = await module.openPeer({ url });
  const openMs = Math.round(performance.now() - openedAt);
  const context = { postgresPid, progress: (text) => void send({ type: 'progress', text }) };
  try {
    const result = await workload(peer, options, context);
    const faults = peer.faults === undefined ? {} : { faults: { ...peer.faults } };
    return { openMs, ...result, errors: [...peer.errors], ...faults };
  } finally {
    await peer.close();
  }
}

serveCell(run);
