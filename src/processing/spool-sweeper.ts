import type { Logger } from 'pino';
import { PeriodicTask } from '../periodic-task.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';

/** ContentSpool files no job refers to are removed once this old (an upload in progress is younger). */
const SPOOL_ORPHAN_GRACE_MS = 60 * 60_000;
const SPOOL_SWEEP_INTERVAL_MS = 15 * 60_000;

/**
 * Removes spool files that no job refers to (a submission that failed, a crash mid-way), at start
 * and every 15 minutes, with a log line of what it removed.
 */
export class SpoolSweeper extends PeriodicTask {
  constructor(store: Store, spool: ContentSpool, logger: Logger) {
    super(
      async () => {
        const removed = await spool.removeOrphans(SPOOL_ORPHAN_GRACE_MS, (id) =>
          store.jobs.exists(id),
        );
        if (removed.files > 0) logger.info(removed, 'removed orphan spool files');
      },
      SPOOL_SWEEP_INTERVAL_MS,
      logger,
      'sweeping the spool',
    );
  }
}
