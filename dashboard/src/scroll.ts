// How much of a scrolling list is out of view below, so that the page can say the list scrolls.
import { useEffect, useState, type MutableRef } from 'preact/hooks';

/**
 * The items (children) of the scrolling element `list` that start below its visible part: 0
 * when all are in view or it is scrolled to the end. Follows scrolls and resizes, and measures
 * again when one of `deps` changes (what the items show).
 */
export function useHiddenBelow(
  list: MutableRef<HTMLElement | null>,
  deps: readonly unknown[],
): number {
  const [below, setBelow] = useState(0);
  useEffect(() => {
    const element = list.current;
    if (element === null) {
      setBelow(0);
      return;
    }
    const measure = () => {
      const bottom = element.getBoundingClientRect().bottom;
      let hidden = 0;
      for (const child of element.children) {
        // Items go down the list: the first one that starts out of view and all after it.
        if (child.getBoundingClientRect().top >= bottom - 1) hidden++;
      }
      setBelow(hidden);
    };
    measure();
    element.addEventListener('scroll', measure, { passive: true });
    const resize = new ResizeObserver(measure);
    resize.observe(element);
    return () => {
      element.removeEventListener('scroll', measure);
      resize.disconnect();
    };
  }, [list, ...deps]);
  return below;
}
