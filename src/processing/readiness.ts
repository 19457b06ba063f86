import type { ClamdClient, ClamdVersion } from '../engines/clamav/clamd-client.js';
import type { ContentSpool } from '../spool/content-spool.js';
import type { Store } from '../store/store.js';

/** What readiness depends on, asked together: the store, the malware engine, room in the spool. */
export class Readiness {
  constructor(
    private readonly store: Store,
    private readonly clamd: ClamdClient,
    private readonly spool: ContentSpool,
    /** The largest upload: the spool is full until it has room for one (or a tenth of its disk). */
    private readonly uploadBytes: number,
  ) {}

  /** A write in the request's path found the disk full: readiness says so until there is room. */
  noteDiskFull(): void {
    this.spool.noteDiskFull();
  }

  /** Each check's outcome; none throws. */
  check(): Promise<
    [PromiseSettledResult<void>, PromiseSettledResult<ClamdVersion>, PromiseSettledResult<boolean>]
  > {
    return Promise.allSettled([
      this.store.ping(),
      this.clamd.version(),
      this.spool.diskFull(this.uploadBytes),
    ]);
  }
}
