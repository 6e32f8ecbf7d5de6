// A topic's settings on its card: paused or delivering, its rate limit, and the buttons that
// change them (PATCH / POST /v1/topics/:topic...). Read when the card opens and after each change;
// a change made elsewhere shows at the next open of the card.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Unauthorized, type TopicSettingsInfo } from './api.js';
import { errorText, number } from './format.js';

export function TopicSettings(props: {
  topic: string;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const { topic } = props;
  const [info, setInfo] = useState<TopicSettingsInfo | null>(null);
  const [note, setNote] = useState('');
  const [rate, setRate] = useState('');
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
      if (err instanceof Unauthorized) props.onUnauthorized(err);
      if (n === latest.current) setNote(`Could not ${what}: ${errorText(err)}`);
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
    void run(`limit ${topic} to ${number(perSecond)} a second`, () =>
      api.configureTopic(topic, { rateLimit: { perSecond } }),
    );
  };

  const limit = info?.rateLimit;
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
      {note !== '' && (
        <p class="note" data-testid="settings-note">
          {note}
        </p>
      )}
    </div>
  );
}
