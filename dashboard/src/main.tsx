/**
 * The tickwheel dashboard: one poll of GET /v1/dashboard every POLL_MS (paused while the tab is
 * hidden), plus on-demand calls for message lookup and dead letters. Rates and the lateness
 * history are computed here from successive snapshots, so the server keeps no history.
 */

import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, ApiError, getToken, setToken, Unauthorized } from './api.js';
import type { DashboardSnapshot, MessageInfo } from './api.js';
import { LineChart } from './chart.js';
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

const number = (n: number | null | undefined) =>
  n === null || n === undefined ? '–' : n.toLocaleString('en-US');
const rateText = (n: number | null | undefined) =>
  n === null || n === undefined
    ? '–'
    : `${n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')}/s`;
const when = (epochMs: number) =>
  new Date(epochMs).toISOString().replace('T', ' ').replace('Z', ' UTC');

function TokenForm(props: { onSaved: () => void }) {
  const [value, setValue] = useState('');
  return (
    <form
      class="card token"
      data-testid="token-form"
      onSubmit={(event) => {
        event.preventDefault();
        setToken(value.trim());
        props.onSaved();
      }}
    >
      <h2>This server needs a token</h2>
      <p>It is kept in this tab only (sessionStorage) and sent as a Bearer header.</p>
      <input
        type="password"
        name="token"
        placeholder="token"
        value={value}
        onInput={(event) => setValue((event.target as HTMLInputElement).value)}
      />
      <button type="submit">Use token</button>
    </form>
  );
}

function Counters(props: { snapshot: DashboardSnapshot; history: History }) {
  const { snapshot, history } = props;
  const last = <T,>(values: T[]) => values[values.length - 1];
  const topics = Object.entries(snapshot.topics).sort(([a], [b]) => a.localeCompare(b));
  return (
    <section class="card wide">
      <h2>Topics</h2>
      <div class="tiles">
        <Tile label="schedule rate" value={rateText(last(history.scheduleRate))} />
        <Tile label="delivery rate" value={rateText(last(history.deliveryRate))} />
        <Tile label="ack rate" value={rateText(last(history.ackRate))} />
        <Tile label="live (all topics)" value={number(snapshot.totals.live)} testid="total-live" />
        <Tile label="dead (all topics)" value={number(snapshot.totals.dead)} testid="total-dead" />
        <Tile
          label="lateness p99"
          value={
            snapshot.latenessMs.p99 === null ? '–' : `${snapshot.latenessMs.p99.toFixed(1)} ms`
          }
        />
      </div>
      <table data-testid="topics">
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
              <tr key={topic} data-topic={topic}>
                <td>{topic}</td>
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
        </tbody>
      </table>
    </section>
  );
}

function Tile(props: { label: string; value: string; testid?: string }) {
  return (
    <div class="tile" data-testid={props.testid}>
      <div class="value">{props.value}</div>
      <div class="label">{props.label}</div>
    </div>
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
            >
              <span class="bar-group">{first ? group : ''}</span>
              <span class="bar-label">{bucket.label}</span>
              <span class="bar" style={{ width: `${(100 * bucket.count) / max}%` }} />
              <span class="bar-count">{number(bucket.count)}</span>
            </div>
          );
        })}
      </div>
      <p class="muted small">Every scheduled message, by time until it is due.</p>
    </section>
  );
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
                    title={`level ${index}, slot ${slot}: ${count} timer(s)${slot === level.cursor ? ' (cursor)' : ''}`}
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

function Lookup(props: { onAuth: () => void }) {
  const [id, setId] = useState('');
  const [info, setInfo] = useState<MessageInfo | null>(null);
  const [preview, setPreview] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const [delaySeconds, setDelaySeconds] = useState('60');

  const run = async (action: () => Promise<void>) => {
    try {
      await action();
    } catch (err) {
      if (err instanceof Unauthorized) props.onAuth();
      setNote(err instanceof Error ? err.message : String(err));
    }
  };
  const load = (target: string) =>
    run(async () => {
      setNote('');
      setPreview(null);
      try {
        setInfo(await api.message(target));
      } catch (err) {
        setInfo(null);
        throw err;
      }
      const payload = await api.preview(target).catch(() => null);
      setPreview(payload === null ? null : payload.preview + (payload.truncated ? '…' : ''));
    });

  return (
    <section class="card">
      <h2>Message</h2>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          void load(id.trim());
        }}
      >
        <input
          name="message-id"
          placeholder="message id"
          value={id}
          onInput={(event) => setId((event.target as HTMLInputElement).value)}
        />
        <button type="submit">Look up</button>
      </form>
      {info !== null && (
        <div data-testid="message">
          <dl>
            <dt>id</dt>
            <dd>{info.id}</dd>
            <dt>topic</dt>
            <dd>{info.topic}</dd>
            <dt>status</dt>
            <dd data-testid="message-status">{info.status}</dd>
            <dt>due</dt>
            <dd>{when(info.deliverAt)}</dd>
            <dt>attempts</dt>
            <dd>{info.attempts}</dd>
            <dt>payload</dt>
            <dd>
              <code class="preview">{preview ?? '–'}</code>
            </dd>
          </dl>
          <div class="row">
            <button
              data-testid="cancel"
              onClick={() =>
                void run(async () => {
                  await api.cancel(info.id);
                  await load(info.id);
                  setNote('cancelled');
                })
              }
            >
              Cancel
            </button>
            <input
              class="short"
              name="delay-seconds"
              value={delaySeconds}
              onInput={(event) => setDelaySeconds((event.target as HTMLInputElement).value)}
            />
            <button
              data-testid="reschedule"
              onClick={() =>
                void run(async () => {
                  await api.reschedule(info.id, Math.round(Number(delaySeconds) * 1000));
                  await load(info.id);
                  setNote('rescheduled');
                })
              }
            >
              Reschedule in s
            </button>
          </div>
        </div>
      )}
      {note !== '' && (
        <p class="note" data-testid="message-note">
          {note}
        </p>
      )}
    </section>
  );
}

function DeadLetters(props: { topics: string[]; onAuth: () => void }) {
  const [topic, setTopic] = useState('');
  const [messages, setMessages] = useState<MessageInfo[] | null>(null);
  const [note, setNote] = useState('');

  const load = async (target: string) => {
    try {
      setNote('');
      setMessages((await api.deadLetters(target)).messages);
    } catch (err) {
      if (err instanceof Unauthorized) props.onAuth();
      setNote(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <section class="card">
      <h2>Dead letters</h2>
      <form
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          void load(topic.trim());
        }}
      >
        <input
          name="dead-topic"
          list="known-topics"
          placeholder="topic"
          value={topic}
          onInput={(event) => setTopic((event.target as HTMLInputElement).value)}
        />
        <datalist id="known-topics">
          {props.topics.map((name) => (
            <option key={name} value={name} />
          ))}
        </datalist>
        <button type="submit">Show</button>
      </form>
      {messages !== null && (
        <table data-testid="dead-letters">
          <tbody>
            {messages.length === 0 && (
              <tr>
                <td class="muted">no dead letters in {topic}</td>
              </tr>
            )}
            {messages.map((message) => (
              <tr key={message.id} data-id={message.id}>
                <td class="mono">{message.id}</td>
                <td class="num">{message.attempts} attempts</td>
                <td>
                  <button
                    data-testid="requeue"
                    onClick={async () => {
                      try {
                        await api.requeue(message.id);
                        await load(topic.trim());
                        setNote(`requeued ${message.id}`);
                      } catch (err) {
                        setNote(err instanceof Error ? err.message : String(err));
                      }
                    }}
                  >
                    Requeue
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {note !== '' && (
        <p class="note" data-testid="dead-note">
          {note}
        </p>
      )}
    </section>
  );
}

function App() {
  const [snapshot, setSnapshot] = useState<DashboardSnapshot | undefined>();
  const [history, setHistory] = useState<History>(emptyHistory);
  const [needsToken, setNeedsToken] = useState(false);
  const [error, setError] = useState('');
  const [generation, setGeneration] = useState(0);
  const askForToken = useCallback(() => setNeedsToken(true), []);

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
        setError('');
        setNeedsToken(false);
      } catch (err) {
        if (stopped) return;
        if (err instanceof Unauthorized) {
          setNeedsToken(true);
          return; // Polling resumes when a token is entered.
        }
        setError(err instanceof ApiError || err instanceof Error ? err.message : String(err));
      }
      if (!stopped) timer = setTimeout(poll, POLL_MS);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [generation]);

  const retry = () => {
    setNeedsToken(false);
    setGeneration((n) => n + 1);
  };

  return (
    <main>
      <header>
        <h1>tickwheel</h1>
        <span class="muted">
          {snapshot === undefined
            ? 'connecting…'
            : `v${snapshot.version} · up ${Math.round(snapshot.uptimeMs / 1000)} s`}
        </span>
        {getToken() !== null && (
          <button
            class="link"
            onClick={() => {
              setToken(null);
              retry();
            }}
          >
            forget token
          </button>
        )}
      </header>
      {needsToken && <TokenForm onSaved={retry} />}
      {error !== '' && <p class="error">{error}</p>}
      {snapshot !== undefined && (
        <div class="grid">
          <Counters snapshot={snapshot} history={history} />
          <LineChart
            title="Rates"
            unit="msg/s"
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
            series={[
              { label: 'p50', stroke: '#0891b2' },
              { label: 'p99', stroke: '#dc2626' },
            ]}
            data={[history.time, history.p50, history.p99]}
          />
          <Upcoming buckets={snapshot.upcoming} />
          <Wheel wheel={snapshot.wheel} />
          <Lookup onAuth={askForToken} />
          <DeadLetters topics={Object.keys(snapshot.topics)} onAuth={askForToken} />
        </div>
      )}
    </main>
  );
}

render(<App />, document.getElementById('app') as HTMLElement);
