/**
 * Faults of the background writes (index, checkpoints): retried, not fatal (the log is the
 * truth), but unhealthy while they last (entries pile up, the log is not trimmed). Each is told
 * once to the queue's fault handler (ERR_TICKWHEEL_IO, then TICKWHEEL_STORE_HEALED); problem()
 * is for /healthz, stats() for metrics; other background faults go through report().
 */

import { faultOf, type FaultField, type FaultReporter } from '../../queue/faults.js';
import { describeCause } from '../log/index.js';

/** The parts of the store whose writes are retried rather than fatal. */
type FaultPart = 'index' | 'checkpoint';

const WHAT: Record<FaultPart, string> = {
  index: 'writing the schedule index',
  checkpoint: 'writing a checkpoint',
};

interface Fault {
  /** The error's system code or message: what makes it distinct. */
  kind: string;
  reason: string;
  /** Epoch ms of the first failure of this run of failures. */
  since: number;
  failures: number;
}

export class StoreFaults {
  private readonly active = new Map<FaultPart, Fault>();
  private readonly totals: Record<FaultPart, number> = { index: 0, checkpoint: 0 };

  constructor(
    private readonly dir: string,
    private readonly reporter: FaultReporter,
  ) {}

  /** A background fault that is not retried. */
  report(err: unknown, fields: Record<string, FaultField> = {}): void {
    this.reporter(faultOf(err, { code: 'ERR_TICKWHEEL_IO', fields: { dir: this.dir, ...fields } }));
  }

  fail(part: FaultPart, err: unknown): void {
    this.totals[part]++;
    const kind = (err as NodeJS.ErrnoException | undefined)?.code ?? describeCause(err);
    const reason = `${WHAT[part]} in ${this.dir} fails: ${describeCause(err)}`;
    const fault = this.active.get(part);
    if (fault !== undefined && fault.kind === kind) {
      fault.failures++;
      fault.reason = reason;
      return;
    }
    this.active.set(part, { kind, reason, since: Date.now(), failures: 1 });
    this.reporter(
      faultOf(err, {
        code: 'ERR_TICKWHEEL_IO',
        message: `${reason}; retrying until it succeeds`,
        name: 'TickwheelWarning',
        fields: { dir: this.dir, part },
      }),
    );
  }

  ok(part: FaultPart): void {
    const fault = this.active.get(part);
    if (fault === undefined) return;
    this.active.delete(part);
    this.reporter({
      code: 'TICKWHEEL_STORE_HEALED',
      level: 'info',
      message: `${WHAT[part]} in ${this.dir} works again, after ${fault.failures} failed attempts since ${new Date(fault.since).toISOString()}`,
      name: 'TickwheelWarning',
      fields: { dir: this.dir, part, failures: fault.failures },
    });
  }

  /** What is failing now, with what error and since when; undefined when nothing is. */
  problem(): string | undefined {
    if (this.active.size === 0) return undefined;
    return [...this.active.values()]
      .map(
        (fault) =>
          `${fault.reason} (since ${new Date(fault.since).toISOString()}, ${fault.failures} attempts; retrying)`,
      )
      .join('; ');
  }

  stats() {
    return {
      indexFailing: this.active.has('index') ? 1 : 0,
      checkpointFailing: this.active.has('checkpoint') ? 1 : 0,
      indexWriteFailures: this.totals.index,
      checkpointFailures: this.totals.checkpoint,
    };
  }
}
