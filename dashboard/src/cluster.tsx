/**
 * The cluster card: shown only when the server is a node of a queue on Valkey/Redis or PostgreSQL. One row per
 * node (those that heartbeat first), with the partitions it holds a lease on, so that an
 * operator sees at a glance whether work is spread and whether a dead node's partitions moved.
 */

import type { DashboardSnapshot } from './api.js';
import { number } from './format.js';
import { Tile } from './topic.js';

/** "0-3, 7, 9-10": partition numbers as ranges. */
function ranges(partitions: number[]): string {
  const sorted = [...partitions].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j;
  }
  return parts.join(', ');
}

export function ClusterCard(props: { cluster: NonNullable<DashboardSnapshot['cluster']> }) {
  const { cluster } = props;
  const alive = cluster.nodes.filter((n) => n.alive && n.node !== '(none)').length;
  return (
    <section class="card wide" data-testid="cluster">
      <h2>Cluster</h2>
      <div class="tiles">
        <Tile label="queue" value={cluster.queue} />
        <Tile label="nodes" value={number(alive)} testid="cluster-nodes" />
        <Tile label="partitions" value={number(cluster.partitions)} />
        <Tile label="durability" value={cluster.durability} />
        <Tile label="lease changes (this node)" value={number(cluster.leaseChanges)} />
      </div>
      <table class="topics" data-testid="cluster-nodes-table">
        <thead>
          <tr>
            <th>node</th>
            <th class="num">partitions</th>
            <th>which</th>
          </tr>
        </thead>
        <tbody>
          {cluster.nodes.map((n) => (
            <tr key={n.node} data-node={n.node} class={n.alive ? '' : 'muted'}>
              <td>
                {n.node}
                {n.node === cluster.node ? ' (this server)' : ''}
                {!n.alive && n.node !== '(none)' ? ' (gone)' : ''}
              </td>
              <td class="num" data-field="partitions">
                {number(n.partitions.length)}
              </td>
              <td class="small">{ranges(n.partitions)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
