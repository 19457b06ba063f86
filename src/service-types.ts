// What startService returns, and the faults and clocks only tests pass it.

import type { DataDirClamd } from './engines/clamav/data-dir-clamd.js';
import type { DetectorTestHooks } from './engines/content-type.js';
import type { RouteEntry } from './http/app.js';
import type { OutboundOptions } from './outbound/guarded-http.js';

export interface RunningService {
  /** Base URL the server listens on, e.g. http://127.0.0.1:4000 */
  url: string;
  managedClamd: DataDirClamd | null;
  /** Every route the server answers (HEAD and OPTIONS included), as registered. */
  routes: readonly RouteEntry[];
  /** The ICAP listener's `icap://` and `icaps://` URLs, null where off. */
  icap: { icap: string | null; icaps: string | null };
  stop(): Promise<void>;
}

/** Faults injected by tests only; the command line never passes any. */
export interface ServiceTestHooks {
  detector?: DetectorTestHooks;
  /** The clamd session's idle timeout (30 s by default), short so a test can outlast it. */
  clamdIdleTimeoutMs?: number;
  /** Answers outbound name lookups (fetches and callbacks) instead of DNS. */
  resolve?: OutboundOptions['resolve'];
  /** The console's clock (sessions' sign-in, use and idle times), moved on by a test. */
  consoleClock?: () => number;
  /** How often results past their retention are looked for (a minute by default). */
  resultRetentionIntervalMs?: number;
  /** How often watched buckets' verdicts are written back (every second by default). */
  bucketVerdictsIntervalMs?: number;
  /** How often watched buckets' clean objects are checked for rescans (every 10 s by default). */
  bucketRescansIntervalMs?: number;
}
