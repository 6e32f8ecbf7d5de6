// The topic card's upcoming messages: a topic's pending messages by due time, a page at a
// time, each with cancel and reschedule.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Unauthorized, UPCOMING_PAGE } from './api.js';
import type { MessageInfo } from './api.js';
import { failureText, relative, when } from './format.js';
import { useLatestRead } from './latest.js';
import { MessageLink } from './message.js';
import { Note } from './note.js';
import { CAN_RESCHEDULE, readDelay } from './reschedule.js';

/**
 * A change of the topic's live count reads the shown page again at most this often: under
 * traffic the count changes with every snapshot, and the rows would move while being read.
 */
const LIVE_RELOAD_MS = 5_000;

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
  const read = useLatestRead();

  /** When the page was last read, and the live count it was read for. */
  const loadedAt = useRef(0);
  const loadedLive = useRef(props.live);

  const fail = (err: unknown) => failureText(err, props.onUnauthorized);

  const load = (cursor: string | undefined) => {
    loadedAt.current = Date.now();
    loadedLive.current = props.live;
    return read(
      () => api.upcoming(topic, cursor),
      (next) => {
        setPage(next);
        setLoadError('');
      },
      (err) => setLoadError(`Could not list the upcoming messages: ${fail(err)}`),
    );
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
  }, [topic, at]);

  // Not while a cancel waits for its confirmation: the row asked about stays where it is.
  useEffect(() => {
    if (props.live === loadedLive.current || confirming !== null) return;
    const wait = Math.max(0, loadedAt.current + LIVE_RELOAD_MS - Date.now());
    const timer = setTimeout(() => void load(at), wait);
    return () => clearTimeout(timer);
  }, [topic, at, props.live, confirming]);

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
    const delay = readDelay(delaySeconds);
    if ('problem' in delay) {
      setNote(delay.problem);
      return;
    }
    void act(
      () => api.reschedule(message.id, delay.ms),
      `rescheduled ${message.id} to ${delay.seconds} s from now`,
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
                  <MessageLink id={message.id} onLookup={props.onLookup} />
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
      <Note text={note} testid="upcoming-note" />
    </div>
  );
}
