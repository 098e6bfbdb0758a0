// The window's first paint: the UI paints its frame (navigation, empty lists) at once and asks
// the shell for data only after it, so no IPC round trip or large reply (1,000 tasks) stands
// between the window opening and its first frame.

/**
 * Runs `cb` once the next frame has been painted: an animation frame callback runs just before
 * the frame is rendered, and a message posted from it is delivered after that rendering.
 */
export function afterNextPaint(cb: () => void): void {
  requestAnimationFrame(() => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      cb();
    };
    channel.port2.postMessage(null);
  });
}

let painted: () => void = () => {};
/** Resolves when the UI's first frame has been painted (`main.ts` says when). */
export const firstPaint: Promise<void> = new Promise((resolve) => (painted = resolve));

/** Called once, after the first frame. */
export function markFirstPaint(): void {
  painted();
}

/**
 * How long the data waits for the first frame at most: a window started hidden or minimised
 * gets no animation frames, and its lists must load all the same.
 */
export const PAINT_WAIT_MS = 300;

/** Resolves after the first frame, or after `PAINT_WAIT_MS` if no frame comes. */
export function beforeData(painted: Promise<void> = firstPaint): Promise<void> {
  return Promise.race([painted, new Promise<void>((resolve) => setTimeout(resolve, PAINT_WAIT_MS))]);
}
