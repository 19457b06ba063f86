/**
 * Caps the synchronous scans in progress at once, in all and per account. A synchronous scan holds
 * its upload's socket, a clamd connection and up to the largest engine's limit of content in
 * memory until it answers, so a burst of large uploads would otherwise grow memory without bound.
 * Beyond a cap a request is refused before its body is read (the client retries; asynchronous
 * submissions queue instead). The per-account cap keeps slots for other accounts: one account's
 * slow uploads (a client trickling its bodies) cannot take every slot.
 *
 * Per instance, like the rate limits.
 */
export class SyncScanLimit {
  private running = 0;
  private readonly byAccount = new Map<string, number>();

  constructor(
    readonly capacity: number,
    readonly perAccount: number,
  ) {}

  /**
   * A release function when a slot is free for the account (call it exactly when the scan is
   * over), else the cap that refused it.
   */
  tryAcquire(accountId: string): (() => void) | { refusedBy: 'service' | 'account' } {
    if (this.running >= this.capacity) return { refusedBy: 'service' };
    const held = this.byAccount.get(accountId) ?? 0;
    if (held >= this.perAccount) return { refusedBy: 'account' };
    this.running += 1;
    this.byAccount.set(accountId, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running -= 1;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left === 0) this.byAccount.delete(accountId);
      else this.byAccount.set(accountId, left);
    };
  }

  get inUse(): number {
    return this.running;
  }
}
