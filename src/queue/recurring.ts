/**
 * Recurring schedules whose occurrences become ordinary durable messages, with the id
 * `<name>@<epoch ms>`: creating one twice (after a crash between the message and its record)
 * is the queue's dedup. The record (spec, `through`: the latest occurrence handled) is written
 * after the message is durable. overlap 'allow' creates the next occurrence's message when one
 * comes due; 'skip' creates it LEAD_MS before, only if the previous one's is no longer live.
 * A message created late is due MIN_LEAD_MS after at the earliest, so its record is durable
 * first. Missed occurrences follow catchUp. A change starts a schedule again from its time,
 * cancelling its occurrence created ahead (as a delete does).
 */

import type { Clock } from '../clock/index.js';
import { checkOpen, mayHaveWritten, outcomeUnknown, TickwheelCorruptError } from '../errors.js';
import { TimerWheel, type TimerHandle } from '../timer/index.js';
import { Turns } from './turns.js';
import type { ScheduleRequest } from './message.js';
import {
  MAX_CATCH_UP,
  occurrencesOf,
  type Occurrences,
  type ScheduleSpec,
} from './recurring-spec.js';
import {
  infoOf,
  occurrenceId,
  occurrenceRequest,
  recordFor,
  tooManySchedules,
  type ScheduleInfo,
  type ScheduleRecord,
} from './recurring-records.js';

export { occurrenceId, type ScheduleInfo, type ScheduleRecord } from './recurring-records.js';

/** How long before its time an occurrence of an overlap-'skip' schedule is created. */
export const LEAD_MS = 1_000;
/** The least time between creating an occurrence's message and its being due, at run time. */
export const MIN_LEAD_MS = 250;
/** Steps of a cron schedule scanned for missed occurrences before jumping to the last week. */
const SCAN_BUDGET = 10_000;
const LOOKBACK_MS = 7 * 86_400_000;
/** A failed step is tried again this much later, doubling while it keeps failing. */
const RETRY_MS = 1_000;
const MAX_RETRY_MS = 60_000;

export interface ScheduleHost {
  schedule(request: ScheduleRequest): Promise<unknown>;
  cancel(id: string): Promise<boolean>;
  /** Whether a message is live: scheduled, ready or in flight. */
  isLive(id: string): Promise<boolean>;
}

export interface ScheduleRecords {
  readSchedules(): Promise<ScheduleRecord[]>;
  writeSchedules(records: readonly ScheduleRecord[], deleted: readonly string[]): Promise<void>;
}

interface Held {
  record: ScheduleRecord;
  occurrences: Occurrences;
  timer: TimerHandle | undefined;
  /** Steps failed in a row: the next try waits RETRY_MS doubled this often. */
  failures: number;
  /**
   * An occurrence whose message may exist while the record does not say so yet (its record
   * write failed, or has not been made): cancelled with the version that made it.
   */
  unsaved: number | null;
}

function newHeld(record: ScheduleRecord, occurrences: Occurrences): Held {
  return { record, occurrences, timer: undefined, failures: 0, unsaved: null };
}

export class Scheduler {
  private readonly held = new Map<string, Held>();
  /**
   * New names whose record is being written, not held yet: counted with `held` against
   * `maxSchedules`, since puts of different names run at once.
   */
  private readonly creating = new Set<string>();
  private readonly wheel: TimerWheel<unknown>;
  /** Work per schedule, one at a time: timers, changes. */
  private readonly chains = new Turns();
  private closed = false;

  /** `maxSchedules`: the most schedules held, a put of a new name beyond refused. */
  constructor(
    private readonly clock: Clock,
    private readonly host: ScheduleHost,
    private readonly store: ScheduleRecords,
    private readonly onError: (err: unknown) => void,
    private readonly maxSchedules: number,
  ) {
    this.wheel = new TimerWheel({ clock, unref: true, onError });
  }

  /** Reads the records and brings every schedule up to date; called once when the queue opens. */
  async start(): Promise<void> {
    for (const record of await this.store.readSchedules()) {
      await this.resume(record, storedOccurrences(record, 'cannot be read back'));
    }
  }

  /**
   * Holds a stored record (at open, or adopted) and brings it up to date. One not stepped since
   * its change (`through` null) whose `lastCreated` is still ahead names the previous version's
   * occurrence made ahead: a process that died between writing the record and cancelling it left
   * it pending, and the new version's occurrence of the same id would be taken for it. It is
   * cancelled first; a failed cancel is reported, and the schedule runs on regardless.
   */
  private async resume(record: ScheduleRecord, occurrences: Occurrences): Promise<void> {
    if (
      record.through === null &&
      record.lastCreated !== null &&
      record.lastCreated > this.clock.now()
    ) {
      await this.host.cancel(occurrenceId(record.name, record.lastCreated)).catch(this.onError);
    }
    const held = newHeld(record, occurrences);
    this.held.set(record.name, held);
    await this.stepOrRetry(held, true, false);
  }

  async put(name: string, spec: ScheduleSpec): Promise<ScheduleInfo> {
    return this.serial(name, () => this.replace(name, spec));
  }

  /** Changes a schedule: `change` gives its new spec from the current one; undefined if none. */
  async update(
    name: string,
    change: (spec: ScheduleSpec) => ScheduleSpec,
  ): Promise<ScheduleInfo | undefined> {
    // Read, changed and replaced in the schedule's turn: two updates at once both land, and an
    // update after a delete finds nothing.
    return this.serial(name, async () => {
      const held = this.held.get(name);
      if (held === undefined) return undefined;
      return this.replace(name, change(held.record.spec));
    });
  }

  /** The new record is written first (failing, nothing changed), then the old occurrence cancelled. */
  private async replace(name: string, checked: ScheduleSpec): Promise<ScheduleInfo> {
    const old = this.held.get(name);
    const record = recordFor(name, checked, old?.record, this.clock.now());
    const held = newHeld(record, occurrencesOf(checked, record.anchorAt));
    if (old === undefined) {
      const count = this.held.size + this.creating.size;
      if (count >= this.maxSchedules) throw tooManySchedules(name, count, this.maxSchedules);
      this.creating.add(name);
    }
    try {
      await this.store.writeSchedules([record], []);
    } catch (err) {
      throw mayHaveWritten(err, name);
    } finally {
      // Held from here on: for a new name nothing is awaited before held.set below.
      this.creating.delete(name);
    }
    try {
      if (old !== undefined) await this.stop(old);
      this.held.set(name, held);
      await this.stepOrRetry(held, false, true);
    } catch (err) {
      // The new record is durable: it is in force after a restart whatever failed here.
      throw outcomeUnknown(err, name);
    }
    return this.info(held);
  }

  async get(name: string): Promise<ScheduleInfo | undefined> {
    const held = this.held.get(name);
    return held === undefined ? undefined : this.info(held);
  }

  async list(): Promise<ScheduleInfo[]> {
    return [...this.held.values()]
      .sort((a, b) => (a.record.name < b.record.name ? -1 : 1))
      .map((held) => this.info(held));
  }

  async delete(name: string): Promise<boolean> {
    return this.serial(name, async () => {
      const held = this.held.get(name);
      if (held === undefined) return false;
      await this.stop(held);
      this.held.delete(name);
      try {
        await this.store.writeSchedules([], [name]);
      } catch (err) {
        throw mayHaveWritten(err, name);
      }
      return true;
    });
  }

  /**
   * A record changed through another node of a cluster (src/cluster/schedules.ts) replaces the
   * one held, in the schedule's turn, and is brought up to date; undefined: it was deleted (its
   * occurrence made ahead is cancelled). `adopted` runs in that turn, before the record is
   * stepped. A record whose occurrences cannot be worked out is reported and not run.
   */
  adopt(name: string, record: ScheduleRecord | undefined, adopted?: () => void): Promise<void> {
    return this.serial(name, async () => {
      const old = this.held.get(name);
      if (old?.timer !== undefined) this.wheel.clearTimeout(old.timer);
      this.held.delete(name);
      let occurrences: Occurrences | undefined;
      try {
        if (record !== undefined) occurrences = storedOccurrences(record, 'cannot be run');
      } catch (err) {
        this.onError(err);
      }
      adopted?.();
      if (record === undefined) {
        // Deleted elsewhere. Its occurrence made ahead goes too: the node that deleted it may
        // have failed after its write (a durability wait that failed) or died before its cancel.
        if (old !== undefined) await this.stop(old).catch(this.onError);
        return;
      }
      // Changed elsewhere: an occurrence the old version made and never recorded is not named
      // by the new record's lastCreated, so resume() cannot find it. (A record changed
      // by progress alone, another leader's, keeps updatedAt: then it is that version's own.)
      const orphan = old?.unsaved ?? null;
      if (
        orphan !== null &&
        orphan > this.clock.now() &&
        orphan !== record.lastCreated &&
        record.updatedAt !== old?.record.updatedAt
      ) {
        await this.host.cancel(occurrenceId(name, orphan)).catch(this.onError);
      }
      if (occurrences !== undefined) await this.resume({ ...record }, occurrences);
    });
  }

  async settled(): Promise<void> {
    while (this.chains.size > 0) await this.chains.settled();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.settled().catch(() => {});
    this.wheel.close();
  }

  private async serial<T>(name: string, work: () => Promise<T>): Promise<T> {
    checkOpen(this.closed, 'this DelayQueue is closed');
    return this.chains.run(name, work);
  }

  /** Cancels the timer and the message of an occurrence created ahead and not yet due. */
  private async stop(held: Held): Promise<void> {
    if (held.timer !== undefined) this.wheel.clearTimeout(held.timer);
    held.timer = undefined;
    const { record, unsaved } = held;
    const now = this.clock.now();
    if (record.lastCreated !== null && record.lastCreated > now) {
      await this.host.cancel(occurrenceId(record.name, record.lastCreated));
    }
    if (unsaved !== null && unsaved > now && unsaved !== record.lastCreated) {
      await this.host.cancel(occurrenceId(record.name, unsaved));
    }
  }

  /** Brings a schedule up to date (missed occurrences, the one due for creation), then arms a timer. */
  private async step(held: Held, atOpen: boolean): Promise<void> {
    const { record, occurrences } = held;
    held.timer = undefined;
    if (record.spec.paused || this.closed) return;
    const now = this.clock.now();
    const skip = record.spec.overlap === 'skip';
    // An occurrence created ahead and not due yet: nothing to do before it comes due.
    if (!skip && record.through !== null && record.through > now) {
      this.arm(held, record.through);
      return;
    }
    const base = record.through ?? record.anchorAt;
    const { kept, total, next } = missedAfter(occurrences, record.spec, base, now);
    if (total > 0) {
      const chosen =
        record.spec.catchUp === 'none'
          ? []
          : record.spec.catchUp === 'latest'
            ? kept.slice(-1)
            : kept.slice(-MAX_CATCH_UP);
      const dropped = total - chosen.length;
      // None kept: the scan jumped to the last week and found nothing there. Handled up to now.
      const last = kept[kept.length - 1] ?? Math.floor(now);
      if (chosen.length === 0) {
        await this.save(held, { through: last, skipped: record.skipped + dropped });
      } else {
        record.skipped += dropped;
        for (const at of chosen) await this.occur(held, at, atOpen);
      }
    }
    if (next === null) return;
    if (!skip) {
      await this.occur(held, next, atOpen);
      this.arm(held, next);
    } else if (next - LEAD_MS <= now) {
      await this.occur(held, next, atOpen);
      const after = occurrences.next(next);
      if (after !== null) this.arm(held, after - LEAD_MS);
    } else {
      this.arm(held, next - LEAD_MS);
    }
  }

  /** Creates an occurrence's message, or skips it ('skip' while the previous one is live). */
  private async occur(held: Held, at: number, atOpen: boolean): Promise<void> {
    const { record } = held;
    const { spec } = record;
    if (
      spec.overlap === 'skip' &&
      record.lastCreated !== null &&
      (await this.host.isLive(occurrenceId(record.name, record.lastCreated)))
    ) {
      await this.save(held, { through: at, skipped: record.skipped + 1 });
      return;
    }
    const deliverAt = atOpen ? at : Math.max(at, Math.ceil(this.clock.now() + MIN_LEAD_MS));
    held.unsaved = at;
    await this.host.schedule({
      ...occurrenceRequest(spec),
      id: occurrenceId(record.name, at),
      deliverAt,
    });
    await this.save(held, { through: at, lastCreated: at, created: record.created + 1 });
    held.unsaved = null;
  }

  /**
   * Writes the record with `changes`, adopted once durable: after a failed write the retry does
   * the step again (the queue's dedup answers an occurrence made before).
   */
  private async save(held: Held, changes: Partial<ScheduleRecord>): Promise<void> {
    const next = { ...held.record, ...changes };
    await this.store.writeSchedules([next], []);
    Object.assign(held.record, changes);
  }

  private arm(held: Held, at: number): void {
    if (this.closed) return;
    const name = held.record.name;
    const delay = Math.max(0, at - this.clock.now());
    held.timer = this.wheel.setTimeout(() => {
      if (this.held.get(name) !== held) return;
      this.serial(name, () => this.stepOrRetry(held, false, false)).catch(this.onError);
    }, delay);
  }

  /**
   * step(), tried again RETRY_MS later (doubling) while it fails, so a schedule never stops for
   * good on a passing failure. `rethrow`: the caller hears of it too.
   */
  private async stepOrRetry(held: Held, atOpen: boolean, rethrow: boolean): Promise<void> {
    try {
      await this.step(held, atOpen);
      held.failures = 0;
    } catch (err) {
      if (held.timer !== undefined) this.wheel.clearTimeout(held.timer);
      const wait = Math.min(MAX_RETRY_MS, RETRY_MS * 2 ** held.failures++);
      this.arm(held, this.clock.now() + wait);
      if (rethrow) throw err;
      this.onError(err);
    }
  }

  private info(held: Held): ScheduleInfo {
    return infoOf(held.record, this.clock.now(), held.occurrences);
  }
}

/** A stored record's occurrences; ERR_TICKWHEEL_CORRUPT if they cannot be worked out. */
function storedOccurrences(record: ScheduleRecord, what: string): Occurrences {
  try {
    return occurrencesOf(record.spec, record.anchorAt);
  } catch (err) {
    // Stored once valid (a time zone this platform's data no longer has, say).
    throw new TickwheelCorruptError(
      `recurring schedule ${record.name} ${what}: ${(err as Error).message}`,
    );
  }
}

/**
 * Occurrences after `base` up to `now`: the latest MAX_CATCH_UP (in order), how many there are,
 * and `next`, the first after `now`. Cron ones are scanned (after SCAN_BUDGET steps the scan
 * jumps to the last week, counting the jump as one); `next` is where the scan stopped.
 */
function missedAfter(
  occurrences: Occurrences,
  spec: ScheduleSpec,
  base: number,
  now: number,
): { kept: number[]; total: number; next: number | null } {
  const first = occurrences.next(base);
  if (first === null || first > now) return { kept: [], total: 0, next: first };
  if (spec.everyMs !== null) {
    const every = spec.everyMs;
    // On the grid: the last occurrence by now, and by endAt.
    const last =
      first + Math.floor((Math.min(now, spec.endAt ?? Infinity) - first) / every) * every;
    const total = Math.floor((last - first) / every) + 1;
    const count = Math.min(total, MAX_CATCH_UP);
    return {
      kept: Array.from({ length: count }, (_, i) => last - (count - 1 - i) * every),
      total,
      next: occurrences.next(now),
    };
  }
  const kept: number[] = [];
  let total = 0;
  let steps = 0;
  let at: number | null = first;
  for (; at !== null && at <= now; at = occurrences.next(at)) {
    if (++steps === SCAN_BUDGET && at < now - LOOKBACK_MS) {
      // What was kept so far is older than the jump: only the last week's may be chosen.
      total++;
      kept.length = 0;
      at = now - LOOKBACK_MS;
      continue;
    }
    total++;
    kept.push(at);
    if (kept.length > MAX_CATCH_UP) kept.shift();
  }
  return { kept, total, next: at };
}
