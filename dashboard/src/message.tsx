// The message card: look a message up by id, see its payload, and act on it.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, Unauthorized, Unreachable } from './api.js';
import type { MessageInfo } from './api.js';
import { errorText, failureText, when } from './format.js';
import { idProblem } from './names.js';
import { Note } from './note.js';
import { CAN_RESCHEDULE, readDelay } from './reschedule.js';

/** What each status allows, as the server's routes decide (see docs/http-api.md). */
const CAN_CANCEL = new Set(['scheduled', 'ready', 'inflight', 'dead']);
const CAN_REQUEUE = new Set(['dead']);

export function MessageCard(props: {
  onUnauthorized: (err: Unauthorized) => void;
  /** An id to look up, from elsewhere on the page; `n` changes on every request. */
  request: { id: string; n: number } | null;
}) {
  const [id, setId] = useState('');
  const [info, setInfo] = useState<MessageInfo | null>(null);
  const [preview, setPreview] = useState<string | null>(null);
  const [note, setNote] = useState('');
  const [delaySeconds, setDelaySeconds] = useState('60');
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  /** Only the latest lookup may fill the card: answers can arrive out of order. */
  const latest = useRef(0);
  const card = useRef<HTMLElement>(null);

  const fail = (err: unknown) => setNote(failureText(err, props.onUnauthorized));

  /** Loads `target` into the card; false (with the reason in the note) if it failed. */
  const load = async (target: string): Promise<boolean> => {
    const n = ++latest.current;
    setConfirming(false);
    const problem = idProblem(target);
    if (problem !== null) {
      setInfo(null);
      setNote(problem);
      return false;
    }
    try {
      const next = await api.message(target);
      if (n !== latest.current) return false;
      const same = info?.id === next.id;
      setInfo(next);
      if (!same) setPreview(null);
      const payload = await api.preview(target).catch(() => null);
      if (n !== latest.current) return false;
      // The server keeps no payload once a message is acked or cancelled: the one shown before
      // the cancel stays.
      if (payload !== null) setPreview(payload.preview + (payload.truncated ? '…' : ''));
      else if (!same) setPreview(null);
      return true;
    } catch (err) {
      if (n !== latest.current) return false;
      setInfo(null);
      fail(err);
      return false;
    }
  };

  /** Runs an action on the shown message, then shows its new state and `done`. */
  const act = async (action: () => Promise<unknown>, done: string) => {
    if (info === null) return;
    setBusy(true);
    setConfirming(false);
    try {
      await action();
      if (await load(info.id)) setNote(done);
    } catch (err) {
      fail(err);
      if (err instanceof Unauthorized || err instanceof Unreachable) return;
      // Refused: the message may have moved on meanwhile (delivered, acked), so show where it
      // is now, with the server's reason.
      if (await load(info.id)) setNote(errorText(err));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    if (props.request === null) return;
    setId(props.request.id);
    setNote('');
    void load(props.request.id);
    card.current?.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  }, [props.request]);

  const reschedule = () => {
    if (info === null) return;
    const target = info.id;
    const delay = readDelay(delaySeconds);
    if ('problem' in delay) {
      setNote(delay.problem);
      return;
    }
    void act(() => api.reschedule(target, delay.ms), 'rescheduled');
  };

  const status = info?.status ?? '';
  const canCancel = CAN_CANCEL.has(status);
  const canReschedule = CAN_RESCHEDULE.has(status);
  const canRequeue = CAN_REQUEUE.has(status);
  return (
    <section class="card wide" ref={card}>
      <h2>Message</h2>
      <form
        class="row lookup"
        onSubmit={(event) => {
          event.preventDefault();
          setNote('');
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
            <dd class="mono">{info.id}</dd>
            <dt>topic</dt>
            <dd>{info.topic}</dd>
            <dt>status</dt>
            <dd data-testid="message-status">{info.status}</dd>
            <dt>due</dt>
            <dd>{when(info.deliverAt)}</dd>
            <dt>attempts</dt>
            <dd>{info.attempts}</dd>
            <dt>failure reason</dt>
            <dd class="reason-text">{info.lastError ?? '—'}</dd>
            <dt>payload</dt>
            <dd>
              <code class="preview">{preview ?? '–'}</code>
            </dd>
          </dl>
          {confirming ? (
            <div class="confirm" role="alertdialog" data-testid="confirm-cancel">
              <p>
                Cancel message <code>{info.id}</code>? It will never be delivered; this cannot be
                undone.
              </p>
              <div class="row">
                <button
                  class="danger"
                  data-testid="confirm-yes"
                  disabled={busy}
                  onClick={() => void act(() => api.cancel(info.id), 'cancelled')}
                >
                  Cancel the message
                </button>
                <button
                  class="secondary"
                  data-testid="confirm-no"
                  onClick={() => setConfirming(false)}
                >
                  Keep it
                </button>
              </div>
            </div>
          ) : canCancel || canReschedule || canRequeue ? (
            <div class="row">
              {canCancel && (
                <button
                  class="danger"
                  data-testid="cancel"
                  disabled={busy}
                  onClick={() => {
                    setNote('');
                    setConfirming(true);
                  }}
                >
                  Cancel…
                </button>
              )}
              {canReschedule && (
                <>
                  <input
                    class="short"
                    name="delay-seconds"
                    inputMode="decimal"
                    value={delaySeconds}
                    onInput={(event) => setDelaySeconds((event.target as HTMLInputElement).value)}
                  />
                  <button data-testid="reschedule" disabled={busy} onClick={reschedule}>
                    Reschedule in s
                  </button>
                </>
              )}
              {canRequeue && (
                <button
                  data-testid="message-requeue"
                  disabled={busy}
                  onClick={() => void act(() => api.requeue(info.id), 'requeued')}
                >
                  Requeue
                </button>
              )}
            </div>
          ) : (
            <p class="muted small" data-testid="no-actions">
              Nothing more can be done with a message that is {info.status}.
            </p>
          )}
        </div>
      )}
      <Note text={note} testid="message-note" />
    </section>
  );
}

/** A message id as a link that shows the message in the message card. */
export function MessageLink(props: { id: string; onLookup: (id: string) => void }) {
  return (
    <button class="link mono" title="look this message up" onClick={() => props.onLookup(props.id)}>
      {props.id}
    </button>
  );
}
