import type { Logger } from 'pino';
import type { Store } from '../store/store.js';

/** How often expired tokens are looked for, after the look at start. */
export const TOKEN_PURGE_INTERVAL_MS = 10 * 60_000;

/**
 * Deletes expired tokens at start and then periodically. An expired token is refused already;
 * this keeps the table from growing with every token ever made (a browser page may make one per
 * visit). A failed round is logged and the next one tries again.
 */
export class ExpiredTokenPurge {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly intervalMs = TOKEN_PURGE_INTERVAL_MS,
  ) {}

  async start(): Promise<void> {
    await this.purge();
    this.timer = setInterval(() => {
      void this.purge();
    }, this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.round;
  }

  /** One round; never throws. */
  purge(): Promise<void> {
    this.round = this.round.then(async () => {
      try {
        const removed = await this.store.tokens.deleteExpired(new Date().toISOString());
        if (removed > 0) this.logger.info({ removed }, 'expired tokens deleted');
      } catch (error) {
        this.logger.error({ err: error }, 'deleting expired tokens failed; will try again');
      }
    });
    return this.round;
  }
}
