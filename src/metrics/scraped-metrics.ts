import type { MetricsRegistry } from './registry.js';

/** The async queue: what the store holds (every process sees the same) and what runs here. */
export interface QueueReading {
  /** Jobs any worker may claim now. */
  due: number;
  /** How long the longest-waiting due job has been due, in seconds. */
  oldestDueSeconds: number;
  /** Callback deliveries not yet delivered or given up. */
  callbacksPending: number;
}

/** pg-boss's messages of one queue. */
export interface DispatchCounts {
  queued: number;
  deferred: number;
  active: number;
}

export interface SpoolReading {
  /** Bytes of unfinished async work held, in all. */
  heldBytes: number;
  /** The most one account holds. */
  largestAccountBytes: number;
}

/** clamd's VERSION. */
export interface ClamdReading {
  engine: string;
  /** The official databases' version and date, when they are loaded. */
  databaseVersion: number | null;
  databaseDate: Date | null;
}

export interface ConnectionReading {
  open: number;
  /** The most connections one client address (IPv6: /64) holds. */
  busiestAddress: number;
}

/** Where the values read at scrape time come from; each is read within the scrape's timeout. */
export interface ScrapeSources {
  queue: () => Promise<QueueReading>;
  /** This process's running jobs (0 in a process that runs none). */
  jobsRunning: () => number;
  /** pg-boss's live counts per queue, on PostgreSQL. */
  dispatch: (() => Promise<Record<string, DispatchCounts>>) | null;
  spool: {
    usage: () => Promise<SpoolReading>;
    limits: { totalBytes: number; accountBytes: number };
  };
  clamd: () => Promise<ClamdReading>;
  /** Every database clamd has loaded, as one digest (throws while it loads them). */
  databasesVersion: () => Promise<string>;
  ownSignaturesVersion: () => string;
}

/** The HTTP server's connections (src/http/connection) and their caps. */
export interface ConnectionSource {
  read: () => ConnectionReading;
  limits: { total: number; perAddress: number };
}

/**
 * The gauges read at scrape time. Values from the shared store (the queue, the spool) are the same
 * in every process on it: `serve --processes` keeps their largest (`max`) instead of a sum, and a
 * dashboard over several nodes should do the same (max by the metric, not sum).
 */
export function watchSources(metrics: MetricsRegistry, sources: ScrapeSources): void {
  const queue = metrics.part('queue', sources.queue);
  metrics.scrapedGauge(
    {
      name: 'assay_jobs_due',
      help: 'Async jobs any worker may claim now (due, or their worker’s lease ended); store-wide.',
      aggregator: 'max',
    },
    queue,
    (gauge, value) => gauge.set(value.due),
  );
  metrics.scrapedGauge(
    {
      name: 'assay_jobs_oldest_due_seconds',
      help: 'How long the longest-waiting due job has been due (0: none); store-wide.',
      aggregator: 'max',
    },
    queue,
    (gauge, value) => gauge.set(value.oldestDueSeconds),
  );
  metrics.scrapedGauge(
    {
      name: 'assay_callbacks_pending',
      help: 'Callback deliveries waiting to be delivered or retried; store-wide.',
      aggregator: 'max',
    },
    queue,
    (gauge, value) => gauge.set(value.callbacksPending),
  );
  metrics.gauge({
    name: 'assay_jobs_running',
    help: 'Async jobs this process is running (summed over processes).',
    collect: (gauge) => gauge.set(sources.jobsRunning()),
  });
  if (sources.dispatch !== null) {
    const dispatch = metrics.part('dispatch', sources.dispatch);
    metrics.scrapedGauge(
      {
        name: 'assay_dispatch_messages',
        help: 'pg-boss messages (PostgreSQL) by queue and state: queued (due), deferred (later), active (held by a worker).',
        labelNames: ['queue', 'state'],
        aggregator: 'max',
      },
      dispatch,
      (gauge, counts) => {
        for (const [name, { queued, deferred, active }] of Object.entries(counts)) {
          gauge.set({ queue: name, state: 'queued' }, queued);
          gauge.set({ queue: name, state: 'deferred' }, deferred);
          gauge.set({ queue: name, state: 'active' }, active);
        }
      },
    );
  }
  watchSpool(metrics, sources.spool);
  watchClamd(metrics, sources);
}

function watchSpool(metrics: MetricsRegistry, spool: ScrapeSources['spool']): void {
  const usage = metrics.part('spool', spool.usage);
  metrics.scrapedGauge(
    {
      name: 'assay_spool_bytes',
      help: 'Bytes of async uploads held for unfinished jobs, in all; store-wide.',
      aggregator: 'max',
    },
    usage,
    (gauge, value) => gauge.set(value.heldBytes),
  );
  metrics.scrapedGauge(
    {
      name: 'assay_spool_account_max_bytes',
      help: 'Bytes the account holding the most has held for unfinished jobs; store-wide.',
      aggregator: 'max',
    },
    usage,
    (gauge, value) => gauge.set(value.largestAccountBytes),
  );
  metrics
    .gauge({
      name: 'assay_spool_quota_bytes',
      help: 'ASSAY_SPOOL_MAX_BYTES: the most async uploads may hold in all (beyond it, 507).',
      aggregator: 'max',
    })
    .set(spool.limits.totalBytes);
  metrics
    .gauge({
      name: 'assay_spool_account_quota_bytes',
      help: 'ASSAY_ACCOUNT_SPOOL_MAX_BYTES: the most one account’s async uploads may hold (beyond it, 429).',
      aggregator: 'max',
    })
    .set(spool.limits.accountBytes);
}

function watchClamd(metrics: MetricsRegistry, sources: ScrapeSources): void {
  // clamd not answering is what `assay_clamd_up` reports (null), not a failed scrape.
  const clamd = metrics.part('clamd', async () => {
    const [version, databases] = await Promise.allSettled([
      sources.clamd(),
      sources.databasesVersion(),
    ]);
    if (version.status === 'rejected') return null;
    // While clamd loads its databases their digest is unknown: `loading`.
    return {
      ...version.value,
      databases: databases.status === 'fulfilled' ? databases.value : 'loading',
    };
  });
  metrics.gauge({
    name: 'assay_clamd_up',
    help: 'Whether clamd answered VERSION at this scrape (1) or not (0).',
    aggregator: 'min',
    collect: async (gauge) => gauge.set((await clamd.value()) === null ? 0 : 1),
  });
  const ownSignatures = sources.ownSignaturesVersion;
  metrics.scrapedGauge(
    {
      name: 'assay_clamd_info',
      help: 'Always 1, while clamd answers: its version, the official databases’ version, Assay’s own signatures’ and the digest of every database loaded, as labels (nodes that differ show apart).',
      labelNames: ['version', 'signatures_version', 'own_signatures_version', 'databases_version'],
      aggregator: 'max',
    },
    clamd,
    (gauge, value) => {
      if (value === null) return;
      gauge.set(
        {
          version: value.engine,
          signatures_version: String(value.databaseVersion ?? 'none'),
          own_signatures_version: ownSignatures(),
          databases_version: value.databases,
        },
        1,
      );
    },
  );
  metrics.scrapedGauge(
    {
      name: 'assay_clamd_signatures_age_seconds',
      help: 'Age of the official databases clamd has loaded (absent without them).',
      aggregator: 'max',
    },
    clamd,
    (gauge, value) => {
      const date = value?.databaseDate ?? null;
      if (date !== null) gauge.set(Math.max(0, Math.round((Date.now() - date.getTime()) / 1000)));
      else gauge.remove();
    },
  );
}

export function watchConnections(metrics: MetricsRegistry, connections: ConnectionSource): void {
  metrics.gauge({
    name: 'assay_http_connections_open',
    help: 'Client connections open (summed over processes).',
    collect: (gauge) => gauge.set(connections.read().open),
  });
  metrics.gauge({
    name: 'assay_http_connections_busiest_address',
    help: 'Connections of the client address (IPv6: /64) holding the most, in one process.',
    aggregator: 'max',
    collect: (gauge) => gauge.set(connections.read().busiestAddress),
  });
  metrics
    .gauge({
      name: 'assay_http_connections_limit',
      help: 'ASSAY_MAX_CONNECTIONS of each process (summed over processes).',
    })
    .set(connections.limits.total);
  metrics
    .gauge({
      name: 'assay_http_connections_address_limit',
      help: 'ASSAY_MAX_CONNECTIONS_PER_ADDRESS: the most one address may hold in one process.',
      aggregator: 'max',
    })
    .set(connections.limits.perAddress);
}
