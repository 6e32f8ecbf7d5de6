// A topic's settings on its card: paused or delivering, its rate limit, its push target, and the
// buttons that change them (PATCH / POST /v1/topics/:topic...). A push target is set with a URL
// and a secret; the secret is sent once and never shown (the server does not give it back). Read when the card opens and after each change;
// a change made elsewhere shows at the next open of the card.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Unauthorized, type TopicSettingsInfo } from './api.js';
import { failureText, number } from './format.js';
import { Note } from './note.js';

export function TopicSettings(props: {
  topic: string;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const { topic } = props;
  const [info, setInfo] = useState<TopicSettingsInfo | null>(null);
  const [note, setNote] = useState('');
  const [rate, setRate] = useState('');
  const [burst, setBurst] = useState('');
  const [pushUrl, setPushUrl] = useState('');
  const [secret, setSecret] = useState('');
  const [busy, setBusy] = useState(false);
  /** Only the latest answer may show: a click on another topic can overtake one. */
  const latest = useRef(0);

  /** Runs a call; its note says what it did, unless `quiet` (the first read), or why it failed. */
  const run = async (what: string, call: () => Promise<TopicSettingsInfo>, quiet = false) => {
    const n = ++latest.current;
    setBusy(true);
    try {
      const next = await call();
      if (n !== latest.current) return;
      setInfo(next);
      setNote(quiet ? '' : what);
    } catch (err) {
      const reason = failureText(err, props.onUnauthorized);
      if (n === latest.current) setNote(`Could not ${what}: ${reason}`);
    } finally {
      if (n === latest.current) setBusy(false);
    }
  };

  useEffect(() => {
    setInfo(null);
    setNote('');
    void run('read the settings', () => api.topic(topic), true);
  }, [topic]);

  const setLimit = (event: Event) => {
    event.preventDefault();
    const perSecond = Number(rate);
    if (rate.trim() === '' || !Number.isFinite(perSecond) || perSecond <= 0) {
      setNote('give deliveries per second, a number above 0');
      return;
    }
    // Empty: the server's default, one second's worth.
    const saved = burst.trim() === '' ? undefined : Number(burst);
    if (saved !== undefined && !(Number.isInteger(saved) && saved >= 1)) {
      setNote('give the burst as a whole number of deliveries, at least 1, or leave it empty');
      return;
    }
    void run(`limit ${topic} to ${number(perSecond)} a second`, () =>
      api.configureTopic(topic, {
        rateLimit: saved === undefined ? { perSecond } : { perSecond, burst: saved },
      }),
    );
  };

  const setPush = (event: Event) => {
    event.preventDefault();
    if (pushUrl.trim() === '' || secret === '') {
      setNote('give the URL to push to and the secret to sign with');
      return;
    }
    const url = pushUrl.trim();
    void run(`push ${topic} to ${url}`, async () => {
      const next = await api.configureTopic(topic, { push: { url, secret } });
      setSecret('');
      return next;
    });
  };

  const limit = info?.rateLimit;
  const push = info?.push;
  return (
    <div class="topic-settings" data-testid="topic-settings">
      <div class="row">
        <span
          class={`badge ${info?.paused ? 'paused' : 'running'}`}
          data-testid="topic-state"
          data-paused={info === null ? undefined : String(info.paused)}
        >
          {info === null ? '…' : info.paused ? 'paused' : 'delivering'}
        </span>
        {info !== null &&
          (info.paused ? (
            <button
              data-testid="resume"
              disabled={busy}
              onClick={() => void run(`resume ${topic}`, () => api.resume(topic))}
            >
              Resume
            </button>
          ) : (
            <button
              data-testid="pause"
              disabled={busy}
              onClick={() => void run(`pause ${topic}`, () => api.pause(topic))}
            >
              Pause
            </button>
          ))}
        <span class="muted small" data-testid="rate-limit">
          {limit === undefined
            ? ''
            : limit === null
              ? 'no rate limit'
              : `at most ${number(limit.perSecond)} a second (bursts of ${number(limit.burst)})`}
        </span>
      </div>
      <form class="row" onSubmit={setLimit}>
        <input
          aria-label="deliveries per second"
          data-testid="rate-input"
          inputMode="decimal"
          placeholder="deliveries / s"
          value={rate}
          onInput={(event) => setRate((event.target as HTMLInputElement).value)}
        />
        <input
          aria-label="burst: deliveries saved up at most (empty: one second's worth)"
          data-testid="burst-input"
          inputMode="numeric"
          placeholder="burst (optional)"
          value={burst}
          onInput={(event) => setBurst((event.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="set-rate" disabled={busy}>
          Set limit
        </button>
        {limit !== null && limit !== undefined && (
          <button
            type="button"
            data-testid="remove-rate"
            disabled={busy}
            onClick={() =>
              void run(`remove the limit of ${topic}`, () =>
                api.configureTopic(topic, { rateLimit: null }),
              )
            }
          >
            Remove limit
          </button>
        )}
      </form>
      <div class="row">
        <span class="muted small" data-testid="push-target">
          {push === undefined
            ? ''
            : push === null
              ? 'not pushed: consumers receive its messages'
              : `pushed: ${push.method} ${push.url}, ${number(push.concurrency)} at once, ` +
                `timeout ${number(push.timeoutMs)} ms` +
                (push.headerNames.length > 0 ? `, headers ${push.headerNames.join(', ')}` : '')}
        </span>
        {push !== null && push !== undefined && (
          <button
            type="button"
            data-testid="remove-push"
            disabled={busy}
            onClick={() =>
              void run(`stop pushing ${topic}`, () => api.configureTopic(topic, { push: null }))
            }
          >
            Stop pushing
          </button>
        )}
      </div>
      <form class="row" onSubmit={setPush}>
        <input
          aria-label="URL to push to"
          data-testid="push-url"
          placeholder="https://… to push to"
          value={pushUrl}
          onInput={(event) => setPushUrl((event.target as HTMLInputElement).value)}
        />
        <input
          aria-label="signing secret"
          data-testid="push-secret"
          type="password"
          autoComplete="off"
          placeholder="signing secret (16+ characters)"
          value={secret}
          onInput={(event) => setSecret((event.target as HTMLInputElement).value)}
        />
        <button type="submit" data-testid="set-push" disabled={busy}>
          Push
        </button>
      </form>
      <Note text={note} testid="settings-note" />
    </div>
  );
}
