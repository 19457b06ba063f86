import type { Store } from '../store/store.js';

/**
 * How long a read that found no source holds: a little under the loops' own interval (1 s), so
 * the loops' rounds of one tick share a read and a source added by `assay admin bucket add` is
 * listed as soon as before (holding 5 s added ~25 s to the bucket tests, which add sources to
 * running services).
 */
const NONE_HOLDS_MS = 900;
/** How long a read that found one holds: a source removed meanwhile leaves rounds that find nothing. */
const SOME_HOLD_MS = 5_000;

/**
 * Whether any bucket is watched: one read of at most one row, shared by the loops of a process
 * that runs jobs. A service that watches no bucket asked the store every second in every such
 * process for a listing to claim, finished scans, due write-backs and orphans (four statements);
 * now it asks this once.
 */
export class SourcePresence {
  private known: { any: boolean; at: number } | null = null;
  private reading: Promise<boolean> | null = null;

  constructor(
    private readonly store: Store,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Whether a source existed when last read; a store that fails rejects (the round logs it). */
  any(): Promise<boolean> {
    const known = this.known;
    if (known !== null && this.clock() - known.at < (known.any ? SOME_HOLD_MS : NONE_HOLDS_MS)) {
      return Promise.resolve(known.any);
    }
    const started = this.clock();
    this.reading ??= this.store.bucketSources
      .any()
      .then((any) => {
        this.known = { any, at: started };
        return any;
      })
      .finally(() => {
        this.reading = null;
      });
    return this.reading;
  }
}
