/**
 * The tickwheel dashboard: one poll of GET /v1/dashboard every POLL_MS (paused while the tab is
 * hidden), a slower one of the recurring schedules (schedules.tsx), plus on-demand calls for a
 * message, a topic and its dead letters. Rates and the lateness history are computed here from
 * successive snapshots, so the server keeps no history.
 */

import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, getToken, setToken, Unauthorized, Unreachable } from './api.js';
import type { DashboardSnapshot } from './api.js';
import { LineChart } from './chart.js';
import { ClusterCard } from './cluster.js';
import { clock, errorText, number, rateText } from './format.js';
import { MessageCard } from './message.js';
import { topicProblem } from './names.js';
import { Note } from './note.js';
import { SchedulesCard } from './schedules.js';
import { LIVE_MEANING, liveCount, Tile, TopicCard } from './topic.js';
import './style.css';

const POLL_MS = 1500;
/** Points kept for the charts: 10 minutes at one poll per 1.5 s. */
const HISTORY = 400;

interface History {
  time: number[];
  p50: Array<number | null>;
  p99: Array<number | null>;
  scheduleRate: Array<number | null>;
  deliveryRate: Array<number | null>;
  ackRate: Array<number | null>;
}

const emptyHistory = (): History => ({
  time: [],
  p50: [],
  p99: [],
  scheduleRate: [],
  deliveryRate: [],
  ackRate: [],
});

function appendHistory(
  history: History,
  previous: DashboardSnapshot | undefined,
  next: DashboardSnapshot,
): History {
  const rate = (name: string) => {
    if (previous === undefined) return null;
    const seconds = (next.now - previous.now) / 1000;
    if (seconds <= 0) return null;
    return Math.max(0, (next.counters[name] - previous.counters[name]) / seconds);
  };
  const keep = <T,>(values: T[], value: T) => [...values, value].slice(-HISTORY);
  return {
    time: keep(history.time, next.now / 1000),
    p50: keep(history.p50, next.latenessMs.p50),
    p99: keep(history.p99, next.latenessMs.p99),
    scheduleRate: keep(history.scheduleRate, rate('scheduled')),
    deliveryRate: keep(history.deliveryRate, rate('delivered')),
    ackRate: keep(history.ackRate, rate('acked')),
  };
}

/** Where the page stands with the server's token. */
type Auth =
  | { state: 'ok' }
  /** Asking; `error` says why the last token failed, if one did. */
  | { state: 'asking'; error: string }
  /** A token was entered; the first poll with it has not answered yet. */
  | { state: 'checking' };

function TokenForm(props: { error: string; checking: boolean; onSubmit: (token: string) => void }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="card token"
      data-testid="token-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (value.trim() !== '') props.onSubmit(value.trim());
      }}
    >
      <h2>This server needs a token</h2>
      {props.error !== '' && (
        <p class="error" data-testid="token-error">
          {props.error}
        </p>
      )}
      <p>
        The one given to <code>tickwheel serve --token</code>. It is kept in this tab only
        (sessionStorage) and sent as a Bearer header.
      </p>
      <div class="row">
        <input
          type="password"
          name="token"
          placeholder="token"
          autoFocus
          autoComplete="off"
          value={value}
          disabled={props.checking}
          onInput={(event) => setValue((event.target as HTMLInputElement).value)}
        />
        <button type="submit" disabled={props.checking}>
          {props.checking ? 'Checking…' : 'Use token'}
        </button>
      </div>
    </form>
  );
}

function Counters(props: {
  snapshot: DashboardSnapshot;
  history: History;
  selected: string | null;
  onSelect: (topic: string) => void;
}) {
  const { snapshot, history, selected } = props;
  const [name, setName] = useState('');
  const [note, setNote] = useState('');
  const last = <T,>(values: T[]) => values[values.length - 1];
  const topics = Object.entries(snapshot.topics).sort(([a], [b]) => a.localeCompare(b));
  return (
    <section class="card wide">
      <div class="card-head">
        <h2>Topics</h2>
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault();
            const topic = name.trim();
            const problem = topicProblem(topic);
            setNote(problem ?? '');
            if (problem === null) props.onSelect(topic);
          }}
        >
          <input
            name="topic"
            list="known-topics"
            placeholder="topic"
            value={name}
            onInput={(event) => setName((event.target as HTMLInputElement).value)}
          />
          <datalist id="known-topics">
            {topics.map(([topic]) => (
              <option key={topic} value={topic} />
            ))}
          </datalist>
          <button type="submit">Show</button>
        </form>
      </div>
      <Note text={note} testid="topic-note" invalid />
      <div class="tiles">
        <Tile label="schedule rate" value={rateText(last(history.scheduleRate))} />
        <Tile label="delivery rate" value={rateText(last(history.deliveryRate))} />
        <Tile label="ack rate" value={rateText(last(history.ackRate))} />
        <Tile
          label="live (all topics)"
          value={number(
            Object.values(snapshot.topics).reduce(
              (sum, c) => sum + liveCount(c),
              liveCount(snapshot.otherTopics),
            ),
          )}
          testid="total-live"
          title={LIVE_MEANING}
        />
        <Tile label="dead (all topics)" value={number(snapshot.totals.dead)} testid="total-dead" />
        <Tile
          label="lateness p99"
          value={
            snapshot.latenessMs.p99 === null ? '–' : `${snapshot.latenessMs.p99.toFixed(1)} ms`
          }
        />
      </div>
      <table data-testid="topics" class="topics">
        <thead>
          <tr>
            <th>topic</th>
            <th class="num">scheduled</th>
            <th class="num">ready</th>
            <th class="num">in flight</th>
            <th class="num">dead</th>
          </tr>
        </thead>
        <tbody>
          {topics.length === 0 ? (
            <tr>
              <td colSpan={5} class="muted">
                no messages yet
              </td>
            </tr>
          ) : (
            topics.map(([topic, counts]) => (
              <tr
                key={topic}
                data-topic={topic}
                class={`clickable${topic === selected ? ' selected' : ''}`}
                onClick={() => {
                  setNote('');
                  props.onSelect(topic);
                }}
              >
                <td>
                  <button class="link" title={`show ${topic}`}>
                    {topic}
                  </button>
                </td>
                <td class="num" data-field="scheduled">
                  {number(counts.scheduled)}
                </td>
                <td class="num" data-field="ready">
                  {number(counts.ready)}
                </td>
                <td class="num" data-field="inflight">
                  {number(counts.inflight)}
                </td>
                <td class={`num${counts.dead > 0 ? ' dead' : ''}`} data-field="dead">
                  {number(counts.dead)}
                </td>
              </tr>
            ))
          )}
          {snapshot.topicCount > topics.length && (
            <tr data-testid="other-topics" class="muted">
              <td>{`${number(snapshot.topicCount - topics.length)} more topics`}</td>
              <td class="num">{number(snapshot.otherTopics.scheduled)}</td>
              <td class="num">{number(snapshot.otherTopics.ready)}</td>
              <td class="num">{number(snapshot.otherTopics.inflight)}</td>
              <td class="num">{number(snapshot.otherTopics.dead)}</td>
            </tr>
          )}
        </tbody>
      </table>
      {topics.length > 0 && (
        <p class="muted small">Click a topic for its details and dead letters.</p>
      )}
    </section>
  );
}

/** Which part of the timeline a bucket belongs to, by where it ends. */
function timelineGroup(untilMs: number | null): string {
  if (untilMs === null) return 'beyond';
  if (untilMs <= 60_000) return 'next minute';
  if (untilMs <= 3_600_000) return 'next hour';
  if (untilMs <= 86_400_000) return 'next day';
  return 'beyond';
}

/** "59.2 s", "59 min 40 s", "23 h 59 min": a time until due, to a tenth of a second at most. */
function dueIn(ms: number): string {
  if (ms < 120_000) return `${Number((ms / 1000).toFixed(1))} s`;
  if (ms < 7_200_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** "due in 10 s to less than 59.2 s": the range a bucket was counted over. */
function bucketRange(bucket: DashboardSnapshot['upcoming'][number]): string {
  const from = dueIn(bucket.fromMs);
  if (bucket.untilMs === null) return `due in ${from} or more`;
  const until = dueIn(bucket.untilMs);
  return bucket.fromMs === 0 ? `due in less than ${until}` : `due in ${from} to less than ${until}`;
}

function Upcoming(props: { buckets: DashboardSnapshot['upcoming'] }) {
  const max = Math.max(1, ...props.buckets.map((b) => b.count));
  return (
    <section class="card">
      <h2>Upcoming deliveries</h2>
      <div class="histogram" data-testid="upcoming">
        {props.buckets.map((bucket, i) => {
          const group = timelineGroup(bucket.untilMs);
          const first = i === 0 || timelineGroup(props.buckets[i - 1].untilMs) !== group;
          return (
            <div
              class={`bar-row${first ? ' group-start' : ''}`}
              key={bucket.label}
              data-bucket={bucket.label}
              title={bucketRange(bucket)}
            >
              <span class="bar-group">{first ? group : ''}</span>
              <span class="bar-label">{bucket.label}</span>
              <span class="bar" style={{ width: `${(100 * bucket.count) / max}%` }} />
              <span class="bar-count">{number(bucket.count)}</span>
            </div>
          );
        })}
      </div>
      <p class="muted small">
        Every scheduled message, by time until it is due. Past the in-memory horizon an edge is the
        whole minute at or before it (hover a bar for its exact range).
      </p>
    </section>
  );
}

/** "slot 5", or "slots 320-383" for a cell that sums several slots. */
function slotRange(cell: number, slotsPerCell: number): string {
  if (slotsPerCell <= 1) return `slot ${cell}`;
  const first = cell * slotsPerCell;
  return `slots ${first}-${first + slotsPerCell - 1}`;
}

function Wheel(props: { wheel: DashboardSnapshot['wheel'] }) {
  return (
    <section class="card">
      <h2>Timer wheel</h2>
      <div class="wheel" data-testid="wheel">
        {props.wheel.levels.map((level, index) => {
          const max = Math.max(1, ...level.slots);
          return (
            <div class="level" key={index}>
              <span class="level-name">L{index}</span>
              <div
                class="slots"
                style={{ gridTemplateColumns: `repeat(${level.slots.length}, 1fr)` }}
              >
                {level.slots.map((count, slot) => (
                  <span
                    key={slot}
                    class={`slot${slot === level.cursor ? ' cursor' : ''}`}
                    title={`level ${index}, ${slotRange(slot, level.slotsPerCell)}: ${count} timer(s)${slot === level.cursor ? ' (cursor)' : ''}`}
                    style={
                      count > 0
                        ? { background: `rgba(37, 99, 235, ${0.25 + (0.75 * count) / max})` }
                        : undefined
                    }
                  />
                ))}
              </div>
            </div>
          );
        })}
      </div>
      <p class="muted small">
        Each square is a slot; darker holds more timers; the outlined one is the level's cursor.
        {props.wheel.truncated ? ' Counts are partial (too many timers to count).' : ''}
      </p>
    </section>
  );
}

/** Why polling stopped working, while it does not. */
type Trouble =
  { kind: 'unreachable'; since: number; detail: string } | { kind: 'refused'; message: string };

function App() {
  const [snapshot, setSnapshot] = useState<DashboardSnapshot | undefined>();
  const [history, setHistory] = useState<History>(emptyHistory);
  const [auth, setAuth] = useState<Auth>({ state: 'ok' });
  /** Counts the tokens refused, so that the form starts empty after each. */
  const [asked, setAsked] = useState(0);
  const [trouble, setTrouble] = useState<Trouble | null>(null);
  const [generation, setGeneration] = useState(0);
  const [topic, setTopic] = useState<string | null>(null);
  const [lookup, setLookup] = useState<{ id: string; n: number } | null>(null);

  const onUnauthorized = useCallback((err: Unauthorized) => {
    if (err.tokenSent) {
      // A token the server refuses is of no use, in this tab or after a reload.
      setToken(null);
      setAuth({
        state: 'asking',
        error: `That token was not accepted (${err.message}). Enter the token again.`,
      });
      setAsked((n) => n + 1);
    } else {
      // Several requests can be refused at once: the first refusal's words stay.
      setAuth((auth) => (auth.state === 'asking' ? auth : { state: 'asking', error: '' }));
    }
  }, []);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let previous: DashboardSnapshot | undefined;
    const poll = async () => {
      if (document.hidden) {
        timer = setTimeout(poll, POLL_MS);
        return;
      }
      try {
        const next = await api.snapshot();
        if (stopped) return;
        setHistory((history) => appendHistory(history, previous, next));
        previous = next;
        setSnapshot(next);
        setTrouble(null);
        setAuth({ state: 'ok' });
      } catch (err) {
        if (stopped) return;
        if (err instanceof Unauthorized) {
          onUnauthorized(err);
          return; // Polling starts again when a token is entered.
        }
        if (err instanceof Unreachable) {
          setTrouble((trouble) => ({
            kind: 'unreachable',
            since: trouble?.kind === 'unreachable' ? trouble.since : Date.now(),
            detail: err.detail,
          }));
        } else {
          setTrouble({ kind: 'refused', message: errorText(err) });
        }
      }
      if (!stopped) timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [generation]);

  const submitToken = (token: string) => {
    setToken(token);
    setAuth({ state: 'checking' });
    setGeneration((n) => n + 1);
  };

  let status: string;
  if (auth.state !== 'ok' && snapshot === undefined) status = 'token needed';
  else if (trouble?.kind === 'unreachable') status = 'server unreachable';
  else if (snapshot === undefined) status = 'connecting…';
  else status = `v${snapshot.version} · up ${Math.round(snapshot.uptimeMs / 1000)} s`;

  return (
    <main>
      <header>
        <h1>tickwheel</h1>
        <span class={trouble?.kind === 'unreachable' ? 'error-text' : 'muted'}>{status}</span>
        {getToken() !== null && auth.state === 'ok' && (
          <button
            class="link"
            onClick={() => {
              setToken(null);
              setGeneration((n) => n + 1);
            }}
          >
            forget token
          </button>
        )}
      </header>
      {auth.state !== 'ok' && (
        <TokenForm
          key={asked}
          error={auth.state === 'asking' ? auth.error : ''}
          checking={auth.state === 'checking'}
          onSubmit={submitToken}
        />
      )}
      {trouble?.kind === 'unreachable' && (
        <p class="error" data-testid="connection-error">
          Cannot reach the tickwheel server at {location.host} since {clock(trouble.since)}
          {trouble.detail === '' ? '' : ` (${trouble.detail})`}. Is <code>tickwheel serve</code>{' '}
          running? Trying again every {POLL_MS / 1000} s
          {snapshot === undefined ? '' : `; the figures below are from ${clock(snapshot.now)}`}.
        </p>
      )}
      {trouble?.kind === 'refused' && (
        <p class="error" data-testid="poll-error">
          The server refused the dashboard's request: {trouble.message}
        </p>
      )}
      {snapshot !== undefined && (
        <div class={`grid${trouble !== null ? ' stale' : ''}`}>
          <Counters snapshot={snapshot} history={history} selected={topic} onSelect={setTopic} />
          {topic !== null && (
            <TopicCard
              topic={topic}
              counts={Object.hasOwn(snapshot.topics, topic) ? snapshot.topics[topic] : undefined}
              onClose={() => setTopic(null)}
              onLookup={(id) => setLookup((last) => ({ id, n: (last?.n ?? 0) + 1 }))}
              onUnauthorized={onUnauthorized}
            />
          )}
          <LineChart
            title="Rates"
            unit="msg/s"
            testid="chart-rates"
            emptyText="no data yet: rates appear from the second poll"
            series={[
              { label: 'scheduled', stroke: '#2563eb' },
              { label: 'delivered', stroke: '#16a34a' },
              { label: 'acked', stroke: '#a855f7' },
            ]}
            data={[history.time, history.scheduleRate, history.deliveryRate, history.ackRate]}
          />
          <LineChart
            title="Lateness"
            unit="ms"
            testid="chart-lateness"
            emptyText="no deliveries yet"
            series={[
              { label: 'p50', stroke: '#0891b2' },
              { label: 'p99', stroke: '#dc2626' },
            ]}
            data={[history.time, history.p50, history.p99]}
          />
          {snapshot.cluster !== null && snapshot.cluster !== undefined && (
            <ClusterCard cluster={snapshot.cluster} />
          )}
          <SchedulesCard now={snapshot.now} onUnauthorized={onUnauthorized} />
          <Upcoming buckets={snapshot.upcoming} />
          <Wheel wheel={snapshot.wheel} />
          <MessageCard onUnauthorized={onUnauthorized} request={lookup} />
        </div>
      )}
    </main>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
