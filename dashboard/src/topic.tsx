// The topic card: one topic's counts, its upcoming messages, and its dead letters, with their
// payloads and why they died.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, DEAD_LETTER_LIMIT, Unauthorized } from './api.js';
import type { MessageInfo, TopicCounts } from './api.js';
import { failureText, number, when } from './format.js';
import { useLatestRead } from './latest.js';
import { MessageLink } from './message.js';
import { Note } from './note.js';
import { useHiddenBelow } from './scroll.js';
import { TopicSettings } from './topic-settings.js';
import { UpcomingMessages } from './upcoming.js';

export function Tile(props: {
  label: string;
  value: string;
  testid?: string;
  field?: string;
  /** What the figure counts, shown on hover. */
  title?: string;
}) {
  return (
    <div class="tile" data-testid={props.testid} data-field={props.field} title={props.title}>
      <div class="value">{props.value}</div>
      <div class="label">{props.label}</div>
    </div>
  );
}

/**
 * "Live", wherever the page says it: messages scheduled, ready or in flight. Dead letters are
 * counted apart (the store's own `totals.live` includes them, so the page does not show it).
 */
export const LIVE_MEANING =
  'live: scheduled, ready or in flight (not yet acknowledged or cancelled; dead letters not included)';

export function liveCount(counts: TopicCounts | undefined): number {
  return counts === undefined ? 0 : counts.scheduled + counts.ready + counts.inflight;
}

/** A payload preview as the card shows it: the text, or why there is none. */
type Preview = { text: string } | { failed: string };

export function TopicCard(props: {
  topic: string;
  /** From the latest snapshot; undefined when the topic has no live message nor dead letter. */
  counts: TopicCounts | undefined;
  onClose: () => void;
  onLookup: (id: string) => void;
  onUnauthorized: (err: Unauthorized) => void;
}) {
  const { topic, counts } = props;
  const [messages, setMessages] = useState<MessageInfo[] | null>(null);
  const [loadError, setLoadError] = useState('');
  const [note, setNote] = useState('');
  /** Previews fetched so far, by id; `previews` is its copy that renders. */
  const known = useRef(new Map<string, Preview>());
  const [previews, setPreviews] = useState<ReadonlyMap<string, Preview>>(new Map());
  /** Only the latest load may fill the list: a click on another topic can overtake one. */
  const read = useLatestRead();
  const dead = counts?.dead ?? 0;
  const list = useRef<HTMLUListElement | null>(null);
  const below = useHiddenBelow(list, [messages, previews]);

  const fail = (err: unknown) => failureText(err, props.onUnauthorized);

  const load = () =>
    read(
      () => api.deadLetters(topic),
      ({ messages: next }) => {
        setMessages(next);
        setLoadError('');
      },
      (err) => setLoadError(`Could not list the dead letters: ${fail(err)}`),
    );

  useEffect(() => {
    setMessages(null);
    setNote('');
    setLoadError('');
  }, [topic]);

  // The snapshot's dead count changes when a message dies or is requeued or cancelled: the list
  // follows it without a poll of its own.
  useEffect(() => {
    void load();
  }, [topic, dead]);

  // Payload previews: one request per dead letter not seen yet, one at a time, so that a long
  // list does not flood the server. Dead letters keep their payload, so a preview stays valid.
  useEffect(() => {
    if (messages === null) return;
    let stopped = false;
    // A failed preview is tried again on each load of the list.
    for (const [id, preview] of known.current) if ('failed' in preview) known.current.delete(id);
    void (async () => {
      for (const message of messages) {
        if (stopped) return;
        if (known.current.has(message.id)) continue;
        try {
          const { preview: text, truncated } = await api.preview(message.id);
          known.current.set(message.id, { text: text + (truncated ? '…' : '') });
        } catch (err) {
          known.current.set(message.id, { failed: fail(err) });
        }
        if (stopped) return;
        setPreviews(new Map(known.current));
      }
    })();
    return () => {
      stopped = true;
    };
  }, [messages]);

  const requeue = async (id: string) => {
    try {
      await api.requeue(id);
      setNote(`requeued ${id}`);
    } catch (err) {
      setNote(`Could not requeue ${id}: ${fail(err)}`);
    }
    await load();
  };

  return (
    <section class="card wide" data-testid="topic-details">
      <div class="card-head">
        <h2>
          Topic <span class="mono">{topic}</span>
        </h2>
        <button class="link" aria-label="close the topic" onClick={props.onClose}>
          close
        </button>
      </div>
      <div class="tiles">
        <Tile label="scheduled" field="scheduled" value={number(counts?.scheduled ?? 0)} />
        <Tile label="ready" field="ready" value={number(counts?.ready ?? 0)} />
        <Tile label="in flight" field="inflight" value={number(counts?.inflight ?? 0)} />
        <Tile label="live" field="live" value={number(liveCount(counts))} title={LIVE_MEANING} />
        <Tile label="dead letters" field="dead" value={number(dead)} />
      </div>
      <TopicSettings topic={topic} onUnauthorized={props.onUnauthorized} />
      {counts === undefined && (
        <p class="muted">
          No message of this topic is live, and it has no dead letters. Topics exist as long as they
          have messages: scheduling one to <span class="mono">{topic}</span> makes it.
        </p>
      )}
      <UpcomingMessages
        topic={topic}
        live={liveCount(counts)}
        onLookup={props.onLookup}
        onUnauthorized={props.onUnauthorized}
      />
      <h3>Dead letters</h3>
      {loadError !== '' && <p class="error">{loadError}</p>}
      <div data-testid="dead-letters">
        {messages === null ? (
          loadError === '' && <p class="muted">loading…</p>
        ) : messages.length === 0 ? (
          <p class="muted">no dead letters in {topic}</p>
        ) : (
          <DeadCount shown={messages.length} dead={dead} below={below} />
        )}
        {messages !== null && messages.length > 0 && (
          <div class={`dead-scroll${below > 0 ? ' more' : ''}`}>
            <ul class="dead-list" tabIndex={0} ref={list} aria-label={`dead letters of ${topic}`}>
              {messages.map((message) => {
                const preview = previews.get(message.id);
                return (
                  <li key={message.id} data-id={message.id}>
                    <div class="row spread">
                      <MessageLink id={message.id} onLookup={props.onLookup} />
                      <span class="muted small">
                        {message.attempts} attempt{message.attempts === 1 ? '' : 's'} · last due{' '}
                        {when(message.deliverAt)}
                      </span>
                      <button data-testid="requeue" onClick={() => void requeue(message.id)}>
                        Requeue
                      </button>
                    </div>
                    <div class={`reason${message.lastError === undefined ? ' muted' : ''}`}>
                      reason: {message.lastError ?? '—'}
                    </div>
                    {preview === undefined ? (
                      <code class="preview-pending muted">loading the payload…</code>
                    ) : 'text' in preview ? (
                      <code class="preview">{preview.text}</code>
                    ) : (
                      <code class="preview-pending muted">
                        payload unavailable: {preview.failed}
                      </code>
                    )}
                  </li>
                );
              })}
            </ul>
          </div>
        )}
        {below > 0 && (
          <p class="dead-more small" data-testid="dead-more">
            ↓ {number(below)} more below: scroll the list
          </p>
        )}
      </div>
      <Note text={note} testid="dead-note" />
    </section>
  );
}

/**
 * "showing 12 of 12 dead letters · the list scrolls": how many the list holds, of how many the
 * topic has (it lists the first DEAD_LETTER_LIMIT).
 */
function DeadCount(props: { shown: number; dead: number; below: number }) {
  const { shown, below } = props;
  const dead = Math.max(props.dead, shown);
  const first = shown < dead && shown >= DEAD_LETTER_LIMIT ? 'the first ' : '';
  return (
    <p class="muted small" data-testid="dead-count">
      showing {first}
      {number(shown)} of {number(dead)} dead letter{dead === 1 ? '' : 's'}
      {below > 0 ? ' · the list scrolls' : ''}
    </p>
  );
}
