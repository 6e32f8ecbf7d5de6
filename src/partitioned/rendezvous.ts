/**
 * Which node should own a partition: rendezvous (highest random weight) hashing, so nodes that
 * see the same members agree with no coordination and a join or leave moves about P / N
 * partitions. The score: FNV-1a of the node id mixed with the partition by murmur3's fmix32
 * (FNV alone spreads neighbouring partitions poorly); ties go to the smaller id.
 */

/** FNV-1a over the UTF-16 code units of `text`. */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** murmur3's 32-bit finaliser: every input bit affects every output bit. */
export function mix32(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function score(nodeHash: number, partition: number): number {
  return mix32(nodeHash ^ mix32(partition + 0x9e3779b9));
}

/** The node that should own `partition` among `nodes`. */
export function ownerOf(partition: number, nodes: readonly string[]): string | undefined {
  return winner(partition, nodes, nodes.map(fnv1a));
}

/** The partitions of `0 .. partitions-1` that `node` should own among `nodes`. */
export function partitionsOf(node: string, partitions: number, nodes: readonly string[]): number[] {
  const hashes = nodes.map(fnv1a);
  const mine: number[] = [];
  for (let p = 0; p < partitions; p++) if (winner(p, nodes, hashes) === node) mine.push(p);
  return mine;
}

/** The node of `nodes` (their FNV-1a `hashes`) with the highest score for `partition`. */
function winner(partition: number, nodes: readonly string[], hashes: readonly number[]) {
  let best: string | undefined;
  let bestScore = -1;
  for (let i = 0; i < nodes.length; i++) {
    const s = score(hashes[i], partition);
    if (s > bestScore || (s === bestScore && best !== undefined && nodes[i] < best)) {
      best = nodes[i];
      bestScore = s;
    }
  }
  return best;
}
