import type { Logger } from 'pino';

/**
 * Background work done at start and then every `intervalMs` (expired tokens, orphan spool files).
 * Rounds never overlap, and a failed round (a full disk, the database gone) is logged and the
 * next one tries again: the task never throws and never stops by itself.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> = Promise.resolve();

  constructor(
    private readonly work: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly logger: Logger,
    /** For the log line of a failed round, e.g. 'deleting expired tokens'. */
    private readonly what: string,
  ) {}

  /** Runs the first round (it resolves once that is done), then one per interval. */
  async start(): Promise<void> {
    await this.runOnce();
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.round;
  }

  /** One round, after any round under way; never throws. */
  runOnce(): Promise<void> {
    this.round = this.round.then(async () => {
      try {
        await this.work();
      } catch (error) {
        this.logger.error({ err: error }, `${this.what} failed; will try again`);
      }
    });
    return this.round;
  }
}
