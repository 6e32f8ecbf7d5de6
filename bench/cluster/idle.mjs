#!/usr/bin/env node
/**
 * What an idle cluster node costs: one tickwheel node (64 partitions, all its own) on a fresh
 * 3 + 3 Valkey Cluster, nothing scheduled; after 5 s to settle, over 10 s: commands a second on
 * the primaries, Valkey CPU (all six servers) and the node's own CPU, per second.
 *
 *   node bench/cluster/idle.mjs [--out bench/results]     (needs `npm run build` first)
 *
 * Writes <out>/cluster-idle.json.
 */

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL, fileURLToPath } from 'node:url';
import { startCluster } from '../../scripts/valkey.mjs';
import { redisInfo } from '../queue/redis-server.mjs';

const at = process.argv.indexOf('--out');
const out = at > 0 ? process.argv[at + 1] : fileURLToPath(new URL('../results', import.meta.url));
const { DelayQueue } = await import('../../dist/delay-queue.js');

async function total(servers, section, fields) {
  let sum = 0;
  for (const server of servers) {
    const info = await redisInfo(server.port, section);
    for (const field of fields) sum += Number(info[field]);
  }
  return sum;
}

const cluster = await startCluster({ primaries: 3, replicas: 1 });
try {
  const queue = await DelayQueue.open({ redis: cluster.urls, queue: 'idle' });
  await sleep(5_000);
  const cpu = () => total(cluster.servers, 'cpu', ['used_cpu_user', 'used_cpu_sys']);
  const commands = () => total(cluster.primaries(), 'stats', ['total_commands_processed']);
  const [cpu0, commands0, own0] = [await cpu(), await commands(), process.cpuUsage()];
  await sleep(10_000);
  const own = process.cpuUsage(own0);
  const result = {
    date: new Date().toISOString(),
    partitions: 64,
    nodes: 1,
    commandsPerSecond: Math.round(((await commands()) - commands0) / 10),
    valkeyCpuPerSecond: Math.round(((await cpu()) - cpu0) * 1000) / 10_000,
    nodeCpuPerSecond: Math.round((own.user + own.system) / 1e3) / 10_000,
  };
  await queue.close();
  writeFileSync(join(out, 'cluster-idle.json'), `${JSON.stringify(result, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await cluster.stop();
}
