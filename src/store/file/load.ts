/**
 * Loading the horizon: every index file that starts before the frontier is taken (its entries
 * due before the frontier read, the rest carried on: window-index.ts), and the messages still
 * current handed to the queue.
 */

import type { MessageState } from '../../queue/message.js';
import type { PayloadBudget } from '../../queue/payload-budget.js';
import type { Checkpoints } from './checkpoint.js';
import type { ReplayParts } from './replay.js';
import { handOver, type OnDamaged } from './states.js';

/**
 * Every index file starting before `frontier` is taken, not only the newly covered ones: a file
 * whose load failed earlier is still on disk and is tried again here.
 */
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
    // An entry is current if its id's latest record is the one it points at (a dead
    // message's latest record is its BURY, which no entry points at).
    const collided = tables.collidedPositions();
    const current = (low: number, high: number, position: number) =>
      tables.isLatest(low, high, position, collided);
    const entries = await index.take(key, frontier, current);
    const due = new Map<number, number>();
    for (let i = 0; i < entries.count; i++) {
      const position = entries.position[i];
      if (!current(entries.low[i], entries.high[i], position)) continue;
      // A copy of an entry that another file handed over already (a file taken again after
      // a crash carries its entries again).
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
