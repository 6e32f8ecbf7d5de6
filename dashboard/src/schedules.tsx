/**
 * The schedules card: the recurring schedules (GET /v1/schedules), a form that creates or
 * replaces one (PUT /v1/schedules/:name), and a delete for each, after asking (DELETE).
 *
 * The list has its own slow poll, every SCHEDULES_POLL_MS, rather than the dashboard's 1.5 s one:
 * it has no limit and carries every schedule's payload (up to 64 KiB each), and it changes only
 * when someone changes a schedule or an occurrence passes. A passing occurrence is caught sooner:
 * when a shown next occurrence is behind the server's clock (`now`, from the dashboard's poll),
 * the list is read again, at most once every REFRESH_MIN_MS.
 *
 * A server without recurring schedules (501: one of an earlier version on Valkey/Redis): the card
 * says so and stops asking.
 */

import { useEffect, useRef, useState } from 'preact/hooks';
import { api, ApiError, Unauthorized } from './api.js';
import type { ScheduleInfo, ScheduleSpec } from './api.js';
import { duration, failureText, inZone, number, relative } from './format.js';
import { Note } from './note.js';

const SCHEDULES_POLL_MS = 10_000;
const REFRESH_MIN_MS = 3_000;
/** The server's bounds of everyMs (1 s to 366 days), in the seconds the form asks for. */
const MIN_EVERY_SECONDS = 1;
const MAX_EVERY_SECONDS = 366 * 86_400;

/** The time zones this browser knows, offered for a cron expression; UTC (the default) first. */
const TIME_ZONES: readonly string[] = (() => {
  let zones: string[];
  try {
    zones = Intl.supportedValuesOf('timeZone');
  } catch {
    zones = [];
  }
  return ['UTC', ...zones.filter((zone) => zone !== 'UTC')];
})();

/** Built once: the list is long, and the card renders on every dashboard poll. */
const TIME_ZONE_OPTIONS = (
  <datalist id="schedule-time-zones">
    {TIME_ZONES.map((zone) => (
      <option key={zone} value={zone} />
    ))}
  </datalist>
);

type Listing =
  | { state: 'loading' }
  | { state: 'listed'; schedules: ScheduleInfo[] }
  /** The server has no schedules (answered 501); `reason` is the server's. */
  | { state: 'unavailable'; reason: string };

/** By name, as the server lists them. */
const byName = (a: ScheduleInfo, b: ScheduleInfo) => (a.name < b.name ? -1 : 1);

export function SchedulesCard(props: {
  /** The server's clock at the latest dashboard poll: next and last times are shown from it. */
  now: number;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const { now } = props;
  const [listing, setListing] = useState<Listing>({ state: 'loading' });
  const [loadError, setLoadError] = useState('');
  const [note, setNote] = useState('');
  /** The name of the schedule whose delete is being confirmed. */
  const [confirming, setConfirming] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  /** Only the latest read may fill the table: a change made here overtakes one under way. */
  const latest = useRef(0);
  const lastRead = useRef(0);

  const fail = (err: unknown) => failureText(err, props.onUnauthorized);

  /** Reads the list; false once the server has said this queue has no schedules. */
  const load = async (): Promise<boolean> => {
    const n = ++latest.current;
    lastRead.current = Date.now();
    try {
      const { schedules } = await api.schedules();
      if (n === latest.current) {
        setListing({ state: 'listed', schedules });
        setLoadError('');
      }
      return true;
    } catch (err) {
      if (err instanceof ApiError && err.status === 501) {
        setListing({ state: 'unavailable', reason: err.message });
        return false;
      }
      if (n === latest.current) setLoadError(`Could not list the schedules: ${fail(err)}`);
      return true;
    }
  };

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      const again = document.hidden || (await load());
      if (again && !stopped) timer = setTimeout(poll, SCHEDULES_POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);

  useEffect(() => {
    if (listing.state !== 'listed') return;
    const passed = listing.schedules.some((s) => s.nextAt !== null && s.nextAt <= now);
    if (passed && Date.now() - lastRead.current >= REFRESH_MIN_MS) void load();
  }, [now]);

  /** Shows a change made here at once, from the server's answer to it. */
  const change = (update: (schedules: ScheduleInfo[]) => ScheduleInfo[]) => {
    latest.current++;
    setListing((listing) =>
      listing.state === 'listed'
        ? { state: 'listed', schedules: update(listing.schedules).sort(byName) }
        : listing,
    );
  };

  const saved = (schedule: ScheduleInfo, replaced: boolean) => {
    change((schedules) => [...schedules.filter((s) => s.name !== schedule.name), schedule]);
    setNote(`${replaced ? 'replaced' : 'created'} ${schedule.name}`);
  };

  const remove = async (name: string) => {
    setBusy(true);
    try {
      await api.deleteSchedule(name);
      change((schedules) => schedules.filter((s) => s.name !== name));
      setNote(`deleted ${name}`);
    } catch (err) {
      setNote(`Could not delete ${name}: ${fail(err)}`);
      // It may be gone already (404): show what there is now.
      void load();
    } finally {
      setConfirming(null);
      setBusy(false);
    }
  };

  if (listing.state === 'unavailable') {
    return (
      <section class="card wide" data-testid="schedules">
        <h2>Schedules</h2>
        <p data-testid="schedules-unavailable">
          Recurring schedules are not available on this queue.{' '}
          <span class="muted small">The server says: {listing.reason}</span>
        </p>
      </section>
    );
  }

  const schedules = listing.state === 'listed' ? listing.schedules : null;
  return (
    <section class="card wide schedules" data-testid="schedules">
      <h2>Schedules</h2>
      {loadError !== '' && (
        <p class="error" data-testid="schedules-error">
          {loadError}
        </p>
      )}
      {schedules === null ? (
        loadError === '' && <p class="muted">loading…</p>
      ) : (
        <>
          <table data-testid="schedules-table">
            <thead>
              <tr>
                <th>name</th>
                <th>topic</th>
                <th>when</th>
                <th>next</th>
                <th>last made</th>
                <th class="num">made</th>
                <th class="num">skipped</th>
                <th>missed / overlap</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {schedules.length === 0 ? (
                <tr>
                  <td colSpan={9} class="muted">
                    no recurring schedules yet
                  </td>
                </tr>
              ) : (
                schedules.flatMap((schedule) => [
                  <ScheduleRow
                    key={schedule.name}
                    schedule={schedule}
                    now={now}
                    busy={busy}
                    onDelete={() => {
                      setNote('');
                      setConfirming(schedule.name);
                    }}
                  />,
                  confirming === schedule.name && (
                    <tr key={`${schedule.name} confirm`} class="confirm-row">
                      <td colSpan={9}>
                        <div class="confirm" role="alertdialog" data-testid="confirm-delete">
                          <p>
                            Delete schedule <code>{schedule.name}</code>? It makes no more messages,
                            and its next one, if made already and not yet due, is cancelled. This
                            cannot be undone.
                          </p>
                          <div class="row">
                            <button
                              class="danger"
                              data-testid="confirm-yes"
                              disabled={busy}
                              onClick={() => void remove(schedule.name)}
                            >
                              Delete the schedule
                            </button>
                            <button
                              class="secondary"
                              data-testid="confirm-no"
                              onClick={() => setConfirming(null)}
                            >
                              Keep it
                            </button>
                          </div>
                        </div>
                      </td>
                    </tr>
                  ),
                ])
              )}
            </tbody>
          </table>
          <p class="muted small">
            Each occurrence becomes a message of the topic, with the id{' '}
            <code>name@occurrence time</code>. A schedule that allows overlap makes its next
            occurrence's message when the previous one comes due, so its last made is its next.
          </p>
        </>
      )}
      <Note text={note} testid="schedules-note" />
      {schedules !== null && (
        <ScheduleForm
          names={new Set(schedules.map((s) => s.name))}
          onSaved={saved}
          onUnauthorized={props.onUnauthorized}
        />
      )}
    </section>
  );
}

/** A time as "in 4 min", and below it on the wall clock of the schedule's zone. */
function Time(props: { at: number; now: number; zone: string; ahead?: string }) {
  return (
    <>
      {props.at > props.now && props.ahead !== undefined
        ? props.ahead
        : relative(props.at - props.now)}
      <div class="muted small">{inZone(props.at, props.zone)}</div>
    </>
  );
}

function ScheduleRow(props: {
  schedule: ScheduleInfo;
  now: number;
  busy: boolean;
  onDelete: () => void;
}) {
  const { schedule, now } = props;
  // Interval schedules have no zone of their own: their times are shown in UTC, as elsewhere.
  const zone = schedule.timezone ?? 'UTC';
  return (
    <tr data-schedule={schedule.name}>
      <td class="mono">
        {schedule.name}
        {schedule.paused && <span class="badge paused">paused</span>}
      </td>
      <td>{schedule.topic}</td>
      <td data-field="when">
        {schedule.cron !== null ? (
          <>
            <code>{schedule.cron}</code>
            <div class="muted small">{schedule.timezone}</div>
          </>
        ) : (
          `every ${duration(schedule.everyMs ?? 0)}`
        )}
      </td>
      <td data-field="next" data-at={schedule.nextAt ?? undefined}>
        {schedule.nextAt === null ? (
          <span class="muted">{schedule.paused ? 'none while paused' : 'none: past its end'}</span>
        ) : (
          <Time at={schedule.nextAt} now={now} zone={zone} />
        )}
      </td>
      <td data-field="last" data-at={schedule.lastAt ?? undefined}>
        {schedule.lastAt === null ? (
          '–'
        ) : (
          <Time at={schedule.lastAt} now={now} zone={zone} ahead="made ahead" />
        )}
      </td>
      <td class="num" data-field="created">
        {number(schedule.created)}
      </td>
      <td class="num" data-field="skipped">
        {number(schedule.skipped)}
      </td>
      <td class="small" data-field="policy">
        catch up {schedule.catchUp} · overlap {schedule.overlap}
      </td>
      <td>
        <button
          class="danger"
          data-testid="schedule-delete"
          disabled={props.busy}
          onClick={props.onDelete}
        >
          Delete…
        </button>
      </td>
    </tr>
  );
}

type Recurrence = 'cron' | 'every';

function ScheduleForm(props: {
  /** The schedules listed: saving one of these names replaces it. */
  names: ReadonlySet<string>;
  onSaved: (schedule: ScheduleInfo, replaced: boolean) => void;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const [name, setName] = useState('');
  const [topic, setTopic] = useState('');
  const [recurrence, setRecurrence] = useState<Recurrence>('cron');
  const [cron, setCron] = useState('');
  const [timezone, setTimezone] = useState('');
  const [everySeconds, setEverySeconds] = useState('');
  const [payload, setPayload] = useState('');
  const [note, setNote] = useState('');
  const [busy, setBusy] = useState(false);
  const replacing = props.names.has(name.trim());

  /**
   * What to send, or why the form cannot say yet. The server checks the rest (names, the cron
   * expression, the time zone) and its message is shown as it is.
   */
  const spec = (): ScheduleSpec | string => {
    if (name.trim() === '') return 'Give the schedule a name.';
    if (topic.trim() === '') return 'Give the topic its messages go to.';
    let parsed: { payload?: unknown } = {};
    if (payload.trim() !== '') {
      try {
        parsed = { payload: JSON.parse(payload) as unknown };
      } catch (err) {
        return `The payload is not JSON: ${(err as Error).message}`;
      }
    }
    if (recurrence === 'cron') {
      if (cron.trim() === '') return 'Give a cron expression, such as 30 2 * * * (02:30 daily).';
      return {
        topic: topic.trim(),
        cron: cron.trim(),
        ...(timezone.trim() === '' ? {} : { timezone: timezone.trim() }),
        ...parsed,
      };
    }
    const seconds = Number(everySeconds.trim());
    if (
      everySeconds.trim() === '' ||
      !Number.isFinite(seconds) ||
      seconds < MIN_EVERY_SECONDS ||
      seconds > MAX_EVERY_SECONDS
    ) {
      return `The interval is a number of seconds, from ${MIN_EVERY_SECONDS} to ${number(MAX_EVERY_SECONDS)} (366 days).`;
    }
    return { topic: topic.trim(), everyMs: Math.round(seconds * 1000), ...parsed };
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    const checked = spec();
    if (typeof checked === 'string') {
      setNote(checked);
      return;
    }
    const target = name.trim();
    setBusy(true);
    setNote('');
    try {
      const schedule = await api.putSchedule(target, checked);
      setName('');
      props.onSaved(schedule, replacing);
    } catch (err) {
      const reason = failureText(err, props.onUnauthorized);
      setNote(`Could not ${replacing ? 'replace' : 'create'} ${target}: ${reason}`);
    } finally {
      setBusy(false);
    }
  };

  const text = (set: (value: string) => void) => (event: Event) =>
    set((event.target as HTMLInputElement | HTMLTextAreaElement).value);

  return (
    <form class="schedule-form" data-testid="schedule-form" onSubmit={submit}>
      <h3>New schedule</h3>
      <div class="row">
        <input
          name="schedule-name"
          aria-label="schedule name"
          placeholder="name"
          autoComplete="off"
          value={name}
          onInput={text(setName)}
        />
        <input
          name="schedule-topic"
          aria-label="topic"
          placeholder="topic"
          value={topic}
          onInput={text(setTopic)}
        />
        <select
          name="schedule-recurrence"
          aria-label="recurrence"
          value={recurrence}
          onChange={(event) =>
            setRecurrence((event.target as HTMLSelectElement).value as Recurrence)
          }
        >
          <option value="cron">cron</option>
          <option value="every">every</option>
        </select>
        {recurrence === 'cron' ? (
          <>
            <input
              name="schedule-cron"
              class="mono"
              aria-label="cron expression"
              placeholder="30 2 * * *"
              value={cron}
              onInput={text(setCron)}
            />
            <input
              name="schedule-timezone"
              aria-label="time zone"
              list="schedule-time-zones"
              placeholder="time zone (UTC)"
              value={timezone}
              onInput={text(setTimezone)}
            />
            {TIME_ZONE_OPTIONS}
          </>
        ) : (
          <>
            <input
              name="schedule-every"
              class="short"
              aria-label="interval in seconds"
              inputMode="decimal"
              placeholder="60"
              value={everySeconds}
              onInput={text(setEverySeconds)}
            />
            <span class="muted">s</span>
          </>
        )}
      </div>
      <textarea
        name="schedule-payload"
        class="mono"
        aria-label="payload (JSON)"
        placeholder='payload (JSON), such as {"report": "sales"}; none if empty'
        rows={2}
        value={payload}
        onInput={text(setPayload)}
      />
      <div class="row">
        <button type="submit" data-testid="schedule-save" disabled={busy}>
          {replacing ? 'Replace' : 'Create'}
        </button>
        <span class="muted small">
          {replacing
            ? `A schedule named ${name.trim()} exists: this replaces it, starting again from now.`
            : 'The payload goes in every occurrence’s message.'}
        </span>
      </div>
      <Note text={note} testid="schedule-form-note" invalid />
    </form>
  );
}
