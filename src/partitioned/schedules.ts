/**
 * Recurring schedules of a partitioned queue (docs/cluster.md, "Recurring schedules"): records
 * kept with partition 0, changed by any node through the driver's `sched` (compared with the
 * version read), run by partition 0's owner with the embedded Scheduler, its writes fenced by its
 * lease epoch. An occurrence is made at most once (scheduleOnce, a mark that lives ONCE_MARK_MS).
 */

import { SystemClock } from '../clock/index.js';
import { TickwheelCorruptError, TickwheelStateError } from '../errors.js';
import { Turns } from '../queue/turns.js';
import { Scheduler, type ScheduleHost } from '../queue/recurring.js';
import {
  infoOf,
  occurrenceId,
  recordFor,
  tooManySchedules,
  type ScheduleInfo,
  type ScheduleRecord,
} from '../queue/recurring-records.js';
import type { ScheduleSpec } from '../queue/recurring-spec.js';
import type { PartitionDriver, SchedAnswer, SchedChange } from './driver.js';

/** How long an occurrence's mark keeps it from being made again: past any leader takeover. */
export const ONCE_MARK_MS = 10 * 60_000;
/** How often the leader looks for changes made through other nodes. */
const WATCH_MS = 200;
/** Changes retried when another change landed between the read and the write. */
const CHANGE_TRIES = 50;
/** An attempt's answer when another change landed meanwhile. */
const AGAIN = Symbol('again');

interface Stored {
  version: number;
  record: ScheduleRecord;
}

export interface PartitionScheduleHost extends ScheduleHost {
  node: string;
  onError(err: unknown): void;
  /** A change of the records, made as durable as the node keeps its writes. */
  sched(change: SchedChange, what: string): Promise<SchedAnswer>;
  /** Whether this node holds partition 0's lease with `epoch` now, by its own clock. */
  leads(epoch: number): boolean;
}

interface Leader {
  epoch: number;
  scheduler: Scheduler;
  /** The version and last occurrence made of each record, as the leader holds it. */
  versions: Map<string, { version: number; lastCreated: number | null }>;
  /** The change count last adopted. */
  changes: string | null;
  watch: ReturnType<typeof setInterval>;
  reconciling: Promise<void> | undefined;
  /** Reconcile even if the change count did not move (a write found a conflict). */
  stale: boolean;
}

export class PartitionSchedules {
  private leader: Leader | undefined;
  /** Leadership changes, one at a time (one key, ''). */
  private readonly leadership = new Turns();
  private closed = false;
  private readonly clock = new SystemClock({ epoch: true });
  /** This node's changes of each schedule (retried()). */
  private readonly changes = new Turns();
  /** Records that cannot be read, reported once per stored text. */
  private readonly unreadable = new Map<string, string>();

  /** `maxSchedules`: a put of a new name is refused while this many records exist. */
  constructor(
    private readonly driver: PartitionDriver,
    private readonly maxSchedules: number,
    private readonly host: PartitionScheduleHost,
  ) {}

  put(name: string, spec: ScheduleSpec): Promise<ScheduleInfo> {
    const put = (old: Stored | undefined) => recordFor(name, spec, old?.record, this.clock.now());
    return this.change(name, put) as Promise<ScheduleInfo>;
  }

  async update(
    name: string,
    change: (spec: ScheduleSpec) => ScheduleSpec,
  ): Promise<ScheduleInfo | undefined> {
    return this.change(name, (old) =>
      old === undefined
        ? undefined
        : recordFor(name, change(old.record.spec), old.record, this.clock.now()),
    );
  }

  async get(name: string): Promise<ScheduleInfo | undefined> {
    const stored = await this.read(name);
    return stored === undefined ? undefined : infoOf(stored.record, this.clock.now());
  }

  async list(): Promise<ScheduleInfo[]> {
    const now = this.clock.now();
    return [...(await this.readAll()).values()]
      .map((stored) => infoOf(stored.record, now))
      .sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async delete(name: string): Promise<boolean> {
    return this.retried(name, async () => {
      const old = await this.read(name);
      if (old === undefined) return false;
      // Its occurrence made ahead goes too, also when the delete's durability wait failed.
      const cancelAhead = async () => {
        const ahead = old.record.lastCreated;
        if (ahead !== null && ahead > this.clock.now()) {
          await this.host.cancel(occurrenceId(name, ahead));
        }
      };
      let done: boolean;
      try {
        ({ done } = await this.sched({ op: 'del', name, version: old.version }));
      } catch (err) {
        if ((err as { code?: string }).code === 'ERR_TICKWHEEL_NOT_DURABLE') {
          await cancelAhead().catch((cancelFailed: unknown) => this.host.onError(cancelFailed));
        }
        throw err;
      }
      if (!done) return AGAIN;
      await cancelAhead();
      return true;
    });
  }

  /** Writes what `make` builds from the stored record, again if another change landed. */
  private change(
    name: string,
    make: (old: Stored | undefined) => ScheduleRecord | undefined,
  ): Promise<ScheduleInfo | undefined> {
    return this.retried(name, async () => {
      const old = await this.read(name);
      const record = make(old);
      if (record === undefined) return undefined;
      const version = old?.version ?? 0;
      const most = this.maxSchedules;
      const { done, full } = await this.sched({
        op: 'put',
        name,
        version,
        record: JSON.stringify(record),
        most,
      });
      if (full !== undefined) throw tooManySchedules(name, full, most);
      return done ? infoOf(record, this.clock.now()) : AGAIN;
    });
  }

  /**
   * This node's changes of `name` one at a time (they do not race each other), each `attempt`
   * made again, after a pause, while another change lands between its read and its write.
   */
  private retried<T>(name: string, attempt: () => Promise<T | typeof AGAIN>): Promise<T> {
    return this.changes.run(name, async () => {
      for (let tries = 0; tries < CHANGE_TRIES; tries++) {
        const result = await attempt();
        if (result !== AGAIN) return result;
        const ms = Math.random() * Math.min(50, 2 + tries * 2);
        await new Promise((resolve) => setTimeout(resolve, ms));
      }
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_CONFLICT',
        `recurring schedule ${name} kept changing while this change was made: try again`,
      );
    });
  }

  /** This node holds partition 0's lease with `epoch`: it runs the schedules. */
  lead(epoch: number): void {
    const start = async () => {
      if (!this.host.leads(epoch)) return; // dropped before its turn came
      if (this.closed || this.leader?.epoch === epoch) return;
      await this.stopLeading();
      const leader: Leader = {
        epoch,
        scheduler: new Scheduler(
          this.clock,
          {
            ...this.host,
            // The store fences a stale leader's writes, but not messages made in other partitions.
            schedule: (request) => {
              if (!this.host.leads(epoch)) return Promise.reject(leaseLost(request.topic));
              return this.host.schedule(request);
            },
          },
          {
            readSchedules: async () => [],
            writeSchedules: (records) => this.save(leader, records),
          },
          (err) => {
            // A record changed meanwhile (adopted next), or a leader that is no more: no warning.
            const code = (err as { code?: string }).code;
            if (code !== 'ERR_TICKWHEEL_CONFLICT' && code !== 'ERR_TICKWHEEL_LEASE_LOST') {
              this.host.onError(err);
            }
          },
          // It only adopts records: tw_sched keeps their count within maxSchedules.
          Infinity,
        ),
        versions: new Map(),
        changes: null,
        watch: setInterval(() => this.watch(leader), WATCH_MS),
        reconciling: undefined,
        stale: true,
      };
      leader.watch.unref();
      this.leader = leader;
      this.watch(leader);
    };
    this.leadership.run('', start).catch((err: unknown) => this.host.onError(err));
  }

  unlead(): void {
    const stop = () => this.stopLeading();
    this.leadership.run('', stop).catch((err: unknown) => this.host.onError(err));
  }

  get leading(): boolean {
    return this.leader !== undefined;
  }

  /** Resolves once the leader has adopted every change made so far (for tests). */
  async settled(): Promise<void> {
    await this.leadership.settled();
    const leader = this.leader;
    if (leader === undefined) return;
    // A look under way may have read the records before this call: one more.
    await leader.reconciling;
    leader.stale = true;
    this.watch(leader);
    await leader.reconciling;
    await leader.scheduler.settled();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.leadership.settled();
    await this.stopLeading();
  }

  private async stopLeading(): Promise<void> {
    const leader = this.leader;
    if (leader === undefined) return;
    this.leader = undefined;
    clearInterval(leader.watch);
    await leader.reconciling?.catch(() => undefined);
    await leader.scheduler.close();
  }

  /** Looks for changes, one look at a time. */
  private watch(leader: Leader): void {
    if (leader.reconciling !== undefined || this.leader !== leader) return;
    leader.reconciling = this.reconcile(leader)
      .catch((err: unknown) => {
        leader.stale = true;
        this.host.onError(err);
      })
      .finally(() => (leader.reconciling = undefined));
  }

  private async reconcile(leader: Leader): Promise<void> {
    const changes = await this.driver.schedChanges();
    if (!leader.stale && changes === leader.changes) return;
    leader.stale = false;
    const all = await this.readAll();
    if (this.leader !== leader) return;
    const adopting: Array<Promise<void>> = [];
    for (const name of leader.versions.keys()) {
      if (!all.has(name)) {
        adopting.push(leader.scheduler.adopt(name, undefined, () => leader.versions.delete(name)));
      }
    }
    for (const [name, stored] of all) {
      if (leader.versions.get(name)?.version === stored.version) continue;
      adopting.push(
        leader.scheduler.adopt(name, stored.record, () =>
          leader.versions.set(name, {
            version: stored.version,
            lastCreated: stored.record.lastCreated,
          }),
        ),
      );
    }
    await Promise.all(adopting);
    leader.changes = changes;
  }

  /** The leader's own writes: fenced by its lease, compared with the version it holds. */
  private async save(leader: Leader, records: readonly ScheduleRecord[]): Promise<void> {
    for (const record of records) {
      const held = leader.versions.get(record.name);
      const { done, fenced, version } = await this.sched({
        op: 'save',
        name: record.name,
        version: held?.version ?? 0,
        record: JSON.stringify(record),
        by: { node: this.host.node, epoch: leader.epoch },
      });
      if (done) {
        leader.versions.set(record.name, { version, lastCreated: record.lastCreated });
        continue;
      }
      if (fenced) {
        // What it made is the next leader's to record (the once mark keeps it single).
        throw leaseLost(record.name);
      }
      // Changed under it by a put or a delete: the occurrence just made goes, mark and all.
      // By another leader's progress: it is that leader's record too, and stays.
      const made = record.lastCreated;
      if (made !== null && made !== held?.lastCreated) {
        const now = await this.read(record.name).catch(() => null);
        if (now !== null && (now === undefined || now.record.updatedAt !== record.updatedAt)) {
          await this.host.cancel(occurrenceId(record.name, made)).catch((err: unknown) => {
            this.host.onError(err);
          });
        }
      }
      leader.stale = true;
      throw new TickwheelStateError(
        'ERR_TICKWHEEL_CONFLICT',
        `recurring schedule ${record.name} was changed meanwhile`,
      );
    }
  }

  private sched(change: SchedChange): Promise<SchedAnswer> {
    return this.host.sched(change, `recurring schedule ${change.name}`);
  }

  private async read(name: string): Promise<Stored | undefined> {
    const text = await this.driver.schedRecord(name);
    return text === undefined ? undefined : parseStored(name, text);
  }

  private async readAll(): Promise<Map<string, Stored>> {
    const all = await this.driver.schedRecords();
    const stored = new Map<string, Stored>();
    for (const [name, text] of Object.entries(all)) {
      // Reported once and left out: the others run.
      try {
        stored.set(name, parseStored(name, text));
        this.unreadable.delete(name);
      } catch (err) {
        if (this.unreadable.get(name) !== text) this.host.onError(err);
        this.unreadable.set(name, text);
      }
    }
    return stored;
  }
}

function parseStored(name: string, text: string): Stored {
  const bar = text.indexOf('|');
  const version = Number(text.slice(0, bar));
  let record: ScheduleRecord | undefined;
  try {
    record = JSON.parse(text.slice(bar + 1)) as ScheduleRecord;
  } catch {
    record = undefined;
  }
  if (bar < 1 || !Number.isInteger(version) || record?.name !== name) {
    throw new TickwheelCorruptError(
      `recurring schedule ${JSON.stringify(name)}: its stored record cannot be read`,
    );
  }
  return { version, record };
}

function leaseLost(what: string): TickwheelStateError {
  return new TickwheelStateError(
    'ERR_TICKWHEEL_LEASE_LOST',
    `recurring schedule (${what}): this node no longer leads the schedules`,
  );
}
