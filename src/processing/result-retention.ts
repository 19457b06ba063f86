import { setImmediate as yieldToOthers } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ApiKey } from '../domain/records.js';
import { PeriodicTask } from '../periodic-task.js';
import type { Store } from '../store/store.js';

/** How often results past their retention are looked for, after the look at start. */
export const RESULT_RETENTION_INTERVAL_MS = 60_000;
/** Results deleted per transaction: short transactions, so the store never stalls on a purge. */
const BATCH = 500;

export interface RetentionSettings {
  /** ASSAY_RESULT_RETENTION: seconds a key's results are kept by default; 0: for good. */
  defaultSeconds: number;
  /** ASSAY_ICAP_RESULT_RETENTION: the default of a key an ICAP service acts as. */
  icapSeconds: number;
  /** The keys ICAP services act as (ASSAY_ICAP_SERVICES). */
  icapKeys: ReadonlySet<string>;
}

/** Seconds a key's results are kept: its own setting, else the default for it; 0: for good. */
export function retentionOf(
  key: Pick<ApiKey, 'id' | 'resultRetention'>,
  settings: RetentionSettings,
) {
  return (
    key.resultRetention ??
    (settings.icapKeys.has(key.id) ? settings.icapSeconds : settings.defaultSeconds)
  );
}

/**
 * Deletes results older than their key's retention, with their traces and callback deliveries, at
 * start and then every minute: key by key, oldest first, BATCH results per transaction. A proxy's
 * ICAP service makes millions of results a day; the API's results are kept for good unless the
 * operator says otherwise.
 */
export class ResultRetention extends PeriodicTask {
  constructor(
    store: Store,
    settings: RetentionSettings,
    logger: Logger,
    intervalMs = RESULT_RETENTION_INTERVAL_MS,
  ) {
    super(
      async () => {
        let removed = 0;
        for (const key of await store.apiKeys.list()) {
          const seconds = retentionOf(key, settings);
          if (seconds <= 0) continue;
          const before = new Date(Date.now() - seconds * 1000).toISOString();
          for (;;) {
            const deleted = await store.transaction((batch) =>
              batch.files.deleteOlderThan(key.id, before, BATCH),
            );
            removed += deleted;
            if (deleted < BATCH) break;
            await yieldToOthers();
          }
        }
        if (removed > 0) logger.info({ removed }, 'results past their retention deleted');
      },
      intervalMs,
      logger,
      'deleting results past their retention',
    );
  }
}
