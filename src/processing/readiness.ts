import type { ClamdClient, ClamdVersion } from '../engines/clamav/clamd-client.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';
import type { QueueReport, QueueStatus } from './queue-status.js';

/**
 * What readiness depends on, asked together: the store, the malware engine, room in the spool,
 * the spool answering (ContentSpool.check: cheap, shared, reused for a second), the version of
 * what clamd has loaded (none while it loads, or while a change on disk is not loaded yet), and
 * the database files it could not load.
 */
export class Readiness {
  constructor(
    private readonly store: Store,
    private readonly clamd: ClamdClient,
    private readonly spool: ContentSpool,
    /** The largest upload: the spool is full until it has room for one (or a tenth of its disk). */
    private readonly uploadBytes: number,
    /** The queue as this process works it; null when it runs no jobs (role `api`). */
    private readonly queue: QueueStatus | null,
    /** The version of every database clamd has loaded (throws while it is loading them). */
    private readonly databasesVersion: () => Promise<string>,
    /** The database files clamd could not load, left out (by name). */
    private readonly refusedDatabases: () => Promise<string[]> = async () => [],
  ) {}

  /** Whether this process runs jobs, so its readiness reports the queue. */
  get runsJobs(): boolean {
    return this.queue !== null;
  }

  /** A write in the request's path found the disk full: readiness says so until there is room. */
  noteDiskFull(): void {
    this.spool.noteDiskFull();
  }

  /** Each check's outcome; none throws. */
  check(): Promise<
    [
      PromiseSettledResult<void>,
      PromiseSettledResult<ClamdVersion>,
      PromiseSettledResult<boolean>,
      PromiseSettledResult<QueueReport | null>,
      PromiseSettledResult<void>,
      PromiseSettledResult<string>,
      PromiseSettledResult<string[]>,
    ]
  > {
    return Promise.allSettled([
      this.store.ping(),
      this.clamd.version(),
      this.spool.diskFull(this.uploadBytes),
      this.queue?.report() ?? Promise.resolve(null),
      this.spool.check(),
      this.databasesVersion(),
      this.refusedDatabases(),
    ]);
  }
}
