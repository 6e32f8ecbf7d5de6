// The topic card's upcoming messages: a topic's pending messages by due time, a page at a
// time, each with cancel and reschedule.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Unauthorized, UPCOMING_PAGE } from './api.js';
import type { MessageInfo } from './api.js';
import { errorText, relative, when } from './format.js';

/** Longest reschedule delay the page offers: the queue refuses more than 100 years ahead. */
const MAX_DELAY_SECONDS = 100 * 365 * 86_400;
/** Statuses a reschedule applies to; an in-flight message must be acked or nacked first. */
const CAN_RESCHEDULE = new Set(['scheduled', 'ready']);

export function UpcomingMessages(props: {
  topic: string;
  /** Live messages of the topic by the latest snapshot: the page is read again when it changes. */
  live: number;
  onLookup: (id: string) => void;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const { topic } = props;
  /** The cursor the shown page was read after (undefined: the first page). */
  const [at, setAt] = useState<string | undefined>(undefined);
  /** How many pages precede the shown one, for the caption. */
  const [pageIndex, setPageIndex] = useState(0);
  const [page, setPage] = useState<{ messages: MessageInfo[]; cursor?: string } | null>(null);
  const [loadError, setLoadError] = useState('');
  const [note, setNote] = useState('');
  const [delaySeconds, setDelaySeconds] = useState('3600');
  const [confirming, setConfirming] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  /** Only the latest read may fill the table: a click on another topic can overtake one. */
  const latest = useRef(0);

  const fail = (err: unknown) => {
    if (err instanceof Unauthorized) props.onUnauthorized(err);
    return errorText(err);
  };

  const load = async (cursor: string | undefined) => {
    const n = ++latest.current;
    try {
      const next = await api.upcoming(topic, cursor);
      if (n !== latest.current) return;
      setPage(next);
      setLoadError('');
    } catch (err) {
      if (n !== latest.current) return;
      setLoadError(`Could not list the upcoming messages: ${fail(err)}`);
    }
  };

  useEffect(() => {
    setAt(undefined);
    setPageIndex(0);
    setPage(null);
    setNote('');
    setConfirming(null);
  }, [topic]);

  useEffect(() => {
    void load(at);
  }, [topic, at, props.live]);

  /** Runs an action on one message, then reads the shown page again. */
  const act = async (action: () => Promise<unknown>, done: string) => {
    setBusy(true);
    setConfirming(null);
    try {
      await action();
      setNote(done);
    } catch (err) {
      setNote(fail(err));
    } finally {
      setBusy(false);
    }
    await load(at);
  };

  const reschedule = (message: MessageInfo) => {
    const seconds = Number(delaySeconds.trim());
    if (delaySeconds.trim() === '' || !Number.isFinite(seconds) || seconds < 0) {
      setNote('The delay is a number of seconds from now: 0 or more.');
      return;
    }
    if (seconds > MAX_DELAY_SECONDS) {
      setNote('The delay can be at most 100 years.');
      return;
    }
    void act(
      () => api.reschedule(message.id, Math.round(seconds * 1000)),
      `rescheduled ${message.id} to ${seconds} s from now`,
    );
  };

  const messages = page?.messages ?? [];
  const now = Date.now();
  return (
    <div data-testid="upcoming-messages">
      <h3>Upcoming messages</h3>
      <div class="row">
        <label class="small muted" for="upcoming-delay">
          reschedule to
        </label>
        <input
          id="upcoming-delay"
          class="short"
          name="upcoming-delay-seconds"
          inputMode="decimal"
          value={delaySeconds}
          onInput={(event) => setDelaySeconds((event.target as HTMLInputElement).value)}
        />
        <span class="small muted">s from now</span>
      </div>
      {loadError !== '' && <p class="error">{loadError}</p>}
      {page === null ? (
        loadError === '' && <p class="muted">loading…</p>
      ) : messages.length === 0 && pageIndex === 0 && page.cursor === undefined ? (
        <p class="muted">nothing pending in {topic}</p>
      ) : (
        <table class="upcoming" aria-label={`upcoming messages of ${topic}`}>
          <thead>
            <tr>
              <th>id</th>
              <th>status</th>
              <th>due</th>
              <th class="num">attempts</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {messages.map((message) => (
              <tr key={message.id} data-id={message.id} data-status={message.status}>
                <td>
                  <button
                    class="link mono"
                    title="look this message up"
                    onClick={() => props.onLookup(message.id)}
                  >
                    {message.id}
                  </button>
                </td>
                <td>{message.status}</td>
                <td data-field="due" data-deliver-at={message.deliverAt}>
                  {when(message.deliverAt)}{' '}
                  <span class="muted small">{relative(message.deliverAt - now)}</span>
                </td>
                <td class="num">{message.attempts}</td>
                <td class="actions">
                  {confirming === message.id ? (
                    <>
                      <button
                        class="danger"
                        data-testid="upcoming-confirm-cancel"
                        disabled={busy}
                        onClick={() =>
                          void act(() => api.cancel(message.id), `cancelled ${message.id}`)
                        }
                      >
                        Cancel it
                      </button>
                      <button class="secondary" onClick={() => setConfirming(null)}>
                        Keep
                      </button>
                    </>
                  ) : (
                    <>
                      {CAN_RESCHEDULE.has(message.status) && (
                        <button
                          data-testid="upcoming-reschedule"
                          disabled={busy}
                          onClick={() => reschedule(message)}
                        >
                          Reschedule
                        </button>
                      )}
                      <button
                        class="danger"
                        data-testid="upcoming-cancel"
                        disabled={busy}
                        onClick={() => {
                          setNote('');
                          setConfirming(message.id);
                        }}
                      >
                        Cancel…
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {page !== null && (pageIndex > 0 || page.cursor !== undefined) && (
        <div class="row">
          <span class="small muted" data-testid="upcoming-page">
            page {pageIndex + 1} · {UPCOMING_PAGE} a page
          </span>
          {pageIndex > 0 && (
            <button
              class="secondary"
              data-testid="upcoming-first"
              onClick={() => {
                setPageIndex(0);
                setAt(undefined);
              }}
            >
              First page
            </button>
          )}
          {page.cursor !== undefined && (
            <button
              data-testid="upcoming-next"
              onClick={() => {
                setPageIndex(pageIndex + 1);
                setAt(page.cursor);
              }}
            >
              Next page
            </button>
          )}
        </div>
      )}
      {note !== '' && (
        <p class="note" data-testid="upcoming-note">
          {note}
        </p>
      )}
    </div>
  );
}
