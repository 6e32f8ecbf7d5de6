/**
 * The horizon: every live message due before `loadedUntil` is held in memory (near.ts), or is
 * being handed over by the load under way; none due at or after it is. Every horizonMs / 4
 * `loadedUntil` moves forward (never back) and one load hands over what came inside; a failing
 * load is reported once per kind of failure, and retried on the next tick.
 */

import type { Clock } from '../clock/index.js';
import type { TimerWheel } from '../timer/index.js';
import { faultOf, type FaultReporter } from './faults.js';
import type { MessageState } from './message.js';
import type { NearHorizon } from './near.js';
import type { RecoveryReport, Store } from './store.js';

export class Horizon {
  private until = 0;
  private loading: Promise<void> | undefined;
  private stopped = false;
  /** The last load's failure, until a load succeeds. */
  private failing: { kind: string; message: string; since: number } | undefined;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly near: NearHorizon,
    private readonly horizonMs: number,
    private readonly onFault: FaultReporter,
  ) {}

  get loadedUntil(): number {
    return this.until;
  }

  admits(deliverAt: number): boolean {
    return deliverAt < this.until;
  }

  async start(wheel: Pick<TimerWheel<unknown>, 'setInterval'>): Promise<RecoveryReport> {
    this.until = this.store.horizonEnd(this.clock.now() + this.horizonMs);
    const report = await this.store.recover(this.until, (message) => this.near.hold(message));
    wheel.setInterval(() => void this.advance(), Math.max(5, this.horizonMs / 4));
    return report;
  }

  /** Records a message's new due time; `written` is called before it is held (and delivered). */
  async relocate(
    message: MessageState,
    previousDeliverAt: number,
    written?: () => void,
  ): Promise<void> {
    const inHorizon = this.admits(message.deliverAt);
    await this.store.move(message, inHorizon, previousDeliverAt);
    written?.();
    if (inHorizon) this.near.hold(message);
  }

  problem(): string | undefined {
    const failing = this.failing;
    if (failing === undefined) return undefined;
    return `loading messages due before ${new Date(this.until).toISOString()} fails: ${failing.message} (since ${new Date(failing.since).toISOString()}; retried every tick)`;
  }

  async settled(): Promise<void> {
    while (this.loading !== undefined) await this.loading;
  }

  /** No load starts after this; one under way finishes without holding what it read. */
  stop(): void {
    this.stopped = true;
  }

  private advance(): Promise<void> {
    if (this.stopped || this.loading !== undefined) return this.loading ?? Promise.resolve();
    this.loading = this.load().finally(() => (this.loading = undefined));
    return this.loading;
  }

  private async load(): Promise<void> {
    const until = Math.max(this.until, this.store.horizonEnd(this.clock.now() + this.horizonMs));
    this.near.beginLoad();
    this.until = until;
    const loaded: MessageState[] = [];
    try {
      await this.store.loadUntil(until, (message) => loaded.push(message));
      this.failing = undefined;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      // One fault, told once: the same system error on another file is not a new one.
      const kind = (err as NodeJS.ErrnoException).code ?? message;
      if (this.failing?.kind !== kind) {
        this.failing = { kind, message, since: Date.now() };
        this.onFault(faultOf(err, { code: 'ERR_TICKWHEEL_IO', fields: { part: 'load' } }));
      } else this.failing.message = message;
    } finally {
      this.near.endLoad(loaded, !this.stopped);
    }
  }
}
