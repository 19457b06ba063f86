/**
 * Caps the synchronous scans in progress at once. A synchronous scan holds its upload's socket,
 * a clamd connection and up to the largest engine's limit of content in memory until it answers,
 * so a burst of large uploads would otherwise grow memory without bound. Beyond the cap a request
 * is refused before its body is read (the client retries; asynchronous submissions queue instead).
 *
 * Per instance, like the rate limits. A per-account share (issue 18) would take the account here.
 */
export class SyncScanLimit {
  private running = 0;

  constructor(readonly capacity: number) {}

  /** A release function when a slot is free (call it exactly when the scan is over), else null. */
  tryAcquire(): (() => void) | null {
    if (this.running >= this.capacity) return null;
    this.running += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running -= 1;
    };
  }

  get inUse(): number {
    return this.running;
  }
}
