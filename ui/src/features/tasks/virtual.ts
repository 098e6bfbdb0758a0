// Windowing for long lists: only the rows in (or near) the viewport exist in the DOM.

export interface Range {
  /** First rendered index (inclusive). */
  start: number;
  /** Last rendered index (exclusive). */
  end: number;
  /** Pixel offset of `start`. */
  offset: number;
  /** Height of the whole list. */
  total: number;
}

/** Rows to render for a fixed row height; `overscan` extra rows on each side keep scrolling smooth. */
export function visibleRange(scrollTop: number, viewport: number, rowHeight: number, count: number, overscan = 6): Range {
  const total = count * rowHeight;
  if (count === 0 || rowHeight <= 0) return { start: 0, end: 0, offset: 0, total: Math.max(0, total) };
  const top = Math.min(Math.max(0, scrollTop), Math.max(0, total - viewport));
  const first = Math.floor(top / rowHeight);
  const visible = Math.ceil(Math.max(viewport, rowHeight) / rowHeight) + 1;
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + visible + overscan);
  return { start, end, offset: start * rowHeight, total };
}

/** The scrollTop that brings row `index` fully into view (or `undefined` if it already is). */
export function scrollToReveal(index: number, scrollTop: number, viewport: number, rowHeight: number): number | undefined {
  const top = index * rowHeight;
  if (top < scrollTop) return top;
  if (top + rowHeight > scrollTop + viewport) return top + rowHeight - viewport;
  return undefined;
}
