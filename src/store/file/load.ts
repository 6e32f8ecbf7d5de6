/** Loading the horizon: index files starting before the frontier taken, current entries handed over. */

import type { MessageState } from '../../queue/message.js';
import type { PayloadBudget } from '../../queue/payload-budget.js';
import type { Checkpoints } from './checkpoint.js';
import type { ReplayParts } from './replay.js';
import { handOver, type OnDamaged } from './states.js';

/** Every file before `frontier`, not only new ones: one whose load failed is retried. */
export async function loadIndexFiles(
  { log, index, tables }: ReplayParts,
  checkpoints: Checkpoints,
  frontier: number,
  onDue: (message: MessageState) => void,
  budget: PayloadBudget | undefined,
  damaged: OnDamaged,
): Promise<void> {
  for (const { key, start } of index.files()) {
    if (start >= frontier) break;
    if (checkpoints.wasLoaded(key)) continue;
    // Current: its id's latest record is the one it points at (a dead one's is its BURY).
    const current = tables.latestCheck();
    const entries = await index.take(key, frontier, current);
    const due = new Map<number, number>();
    for (let i = 0; i < entries.count; i++) {
      const position = entries.position[i];
      if (!current(entries.low[i], entries.high[i], position)) continue;
      // Handed over already by another file (one taken again after a crash carries copies).
      if (tables.near.has(position)) continue;
      due.set(position, entries.deliverAt[i]);
      tables.near.add(position);
    }
    try {
      await handOver(tables, log, due, onDue, damaged, budget);
    } catch (err) {
      // Nothing was handed over (the log read failed): the next load must find them again.
      for (const position of due.keys()) tables.near.delete(position);
      throw err;
    }
    await checkpoints.retire(key);
  }
}
