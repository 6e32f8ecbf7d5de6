// Reads whose answers can arrive out of order: a click elsewhere on the page starts a new read
// before an earlier one has answered, and the earlier answer must not overwrite the newer one.
import { useRef } from 'preact/hooks';

/**
 * Returns `read(call, shown, failed)`: runs `call`, then hands its answer to `shown` or its error
 * to `failed`, but only while no later `read` of the same component has started.
 */
export function useLatestRead() {
  const latest = useRef(0);
  return async <T>(
    call: () => Promise<T>,
    shown: (answer: T) => void,
    failed: (err: unknown) => void,
  ): Promise<void> => {
    const n = ++latest.current;
    try {
      const answer = await call();
      if (n === latest.current) shown(answer);
    } catch (err) {
      if (n === latest.current) failed(err);
    }
  };
}
