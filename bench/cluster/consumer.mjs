/**
 * A consumer process of the cluster benchmark's kill phases (bench/cluster/run.mjs): opens a
 * peer on the Cluster, consumes, and prints `<due> <receivedAt>` per delivery on stdout (epoch
 * ms, one clock with the runner's), flushed every 20 ms. The runner SIGKILLs one of these.
 *
 *   node bench/cluster/consumer.mjs <tickwheel|bullmq> <url,url,...> <queue> <node id>
 */

import { lineWriter } from '../consumer-lines.mjs';
import { openPeer } from './peers.mjs';

const [kind, urls, queue, nodeId] = process.argv.slice(2);
const peer = await openPeer(kind, urls.split(','), { queue, nodeId });
const write = lineWriter();
peer.consume((due) => write(`${due} ${Date.now()}`), 64);
process.stdout.write('ready\n');
