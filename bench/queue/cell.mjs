/**
 * One cell of the queue benchmark: one workload on one peer, in a process of its own (forked
 * by run.mjs with --expose-gc), so that RSS and heap numbers belong to that workload alone.
 *
 * Protocol: the runner sends { peer, workload, options }; the cell answers with any number of
 * { type: 'progress', text } (and, for 'fill', { type: 'acked' } and { type: 'filled' }), then
 * one { type: 'result', result } or { type: 'error', message }, and exits. A 'fill' cell never
 * finishes: the runner kills it.
 */

import { payloadFill, payloadRecover } from './payload-memory-cell.mjs';
import { sustained } from './sustained-workload.mjs';
import { send, serveCell } from '../cell-process.mjs';
import * as workloads from './workloads.mjs';

const CELL_WORKLOADS = { ...workloads, payloadFill, payloadRecover, sustained };

async function peerModule(peer) {
  if (peer === 'tickwheel') return import('./tickwheel-peer.mjs');
  if (peer === 'tickwheel-http') return import('./tickwheel-http-peer.mjs');
  if (peer === 'bullmq') return import('./bullmq-peer.mjs');
  throw new Error(`unknown peer ${peer}`);
}

async function run({ peer: peerName, workload, options }) {
  const progress = (text) => void send({ type: 'progress', text });
  const module = await peerModule(peerName);
  const notify = (message) => void send(message);
  if (workload === 'recover') return module.recoverPeer(options, notify);
  if (workload === 'verify') return module.verifyPeer(options);
  const run = CELL_WORKLOADS[workload];
  if (typeof run !== 'function') throw new Error(`unknown workload ${workload}`);
  const peer = await module.openPeer(options);
  try {
    const result = await run(peer, options, progress, notify);
    return { openMs: Math.round(peer.openMs), ...result };
  } finally {
    await peer.close();
  }
}

serveCell(run);
