import type { Logger } from 'pino';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';
import type { ConsoleAccess } from './console-access.js';

/** How often expired tokens are looked for, after the look at start. */
export const TOKEN_PURGE_INTERVAL_MS = 10 * 60_000;

/**
 * Deletes expired tokens and console sessions at start and then periodically. An expired one is
 * refused already; this keeps the tables from growing with every token ever made (a browser page
 * may make one per visit).
 */
export class ExpiredTokenPurge extends PeriodicTask {
  constructor(
    store: Store,
    logger: Logger,
    consoleAccess: ConsoleAccess | null = null,
    intervalMs = TOKEN_PURGE_INTERVAL_MS,
  ) {
    super(
      async () => {
        const removed = await store.tokens.deleteExpired(new Date().toISOString());
        if (removed > 0) logger.info({ removed }, 'expired tokens deleted');
        const sessions = (await consoleAccess?.purge()) ?? 0;
        if (sessions > 0) logger.info({ removed: sessions }, 'expired console sessions deleted');
      },
      intervalMs,
      logger,
      'deleting expired tokens',
    );
  }
}
