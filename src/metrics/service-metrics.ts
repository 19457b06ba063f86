import type { Logger } from 'pino';
import type { Counter, Histogram } from 'prom-client';
import { FINDING_CATEGORIES, findingCategory } from '../domain/finding-category.js';
import type { ProcessingEvents } from '../processing/processing-events.js';
import { BucketMetrics } from './bucket-metrics.js';
import { inCluster, scrapeCluster, shareWithPrimary } from './cluster-scrape.js';
import { IcapMetrics } from './icap-metrics.js';
import { MetricsRegistry } from './registry.js';
import {
  type ConnectionSource,
  type ScrapeSources,
  watchConnections,
  watchSources,
} from './scraped-metrics.js';

/** The route label of a request no route matched (a 404 or 405): one label, whatever its path. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Requests answered within 5 ms (a ping) to 5 minutes (ASSAY_REQUEST_TIMEOUT's default). */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
/** An engine's answer: 1 ms (a small file in clamd) to 2 minutes (clamd's MaxScanTime). */
const ENGINE_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30, 120,
];

/** Why a request was refused before its route ran (beside its status in the request counter). */
export type Refusal = 'key-rate-limit' | 'authentication-failure-limit' | 'sync-scan-capacity';

/** Why a connection was closed by the connection caps (src/http/connection). */
export type ConnectionDrop = 'address-limit' | 'limit' | 'evicted' | 'header-timeout';

/** A route's series, found without building a key string per request. */
interface RouteSeries {
  duration: Histogram.Internal<'method' | 'route'>;
  byStatus: Map<number, Counter.Internal>;
}

/**
 * Assay's metrics, one set per service: what the HTTP layer and the processing services report as
 * it happens (counters and histograms, cheap to update: their labelled series are looked up once
 * and kept), and what is read at scrape time (scraped-metrics.ts). docs/OPERATIONS.md lists them.
 */
export class ServiceMetrics implements ProcessingEvents {
  private readonly metrics: MetricsRegistry;
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly requestDuration: Histogram<'method' | 'route'>;
  private readonly routes = new Map<string, Map<string, RouteSeries>>();
  private readonly authenticationFailures: Counter;
  private readonly refusals: Counter<'reason'>;
  private readonly connectionDrops: Counter<'reason'>;
  private readonly items: Record<'clean' | 'flagged' | 'error', Counter.Internal>;
  private readonly flagged: Counter<'category'>;
  private readonly scannedBytes: Counter;
  private readonly engineDuration: Histogram<'engine'>;
  private readonly engineErrors: Counter<'engine'>;
  private readonly engines = new Map<string, Histogram.Internal<'engine'>>();
  private readonly verdictLookups: Record<'hit' | 'miss', Counter.Internal>;
  private readonly callbacksDelivered: Counter;
  private readonly callbackAttemptsFailed: Counter;
  private readonly callbacksGivenUpCount: Counter;
  /** In a child of `serve --processes`, a scrape answers for every child. */
  private readonly clustered: boolean;

  constructor(
    private readonly logger: Logger,
    process: { role: string; version: string; engines: readonly string[] },
  ) {
    const metrics = new MetricsRegistry(logger);
    this.metrics = metrics;
    metrics
      .gauge({
        name: 'assay_processes',
        help: 'Assay processes serving, by role and version (1 per process; summed over processes).',
        labelNames: ['role', 'version'],
      })
      .set({ role: process.role, version: process.version }, 1);
    this.requests = metrics.counter({
      name: 'assay_http_requests_total',
      help: 'HTTP requests answered, by method, route template (unmatched: no route) and status.',
      labelNames: ['method', 'route', 'status'],
    });
    this.requestDuration = metrics.histogram({
      name: 'assay_http_request_duration_seconds',
      help: 'Time from a request’s arrival to the end of its answer, by method and route template.',
      labelNames: ['method', 'route'],
      buckets: REQUEST_BUCKETS,
    });
    this.authenticationFailures = metrics.counter({
      name: 'assay_authentication_failures_total',
      help: 'Requests refused with 401 for credentials that were given but wrong or disabled.',
    });
    this.refusals = metrics.counter({
      name: 'assay_requests_refused_total',
      help: 'Requests refused before their route ran: 429 over a key’s rate limit or an address’s failed-authentication limit, 503 over the synchronous-scan caps.',
      labelNames: ['reason'],
    });
    this.connectionDrops = metrics.counter({
      name: 'assay_http_connections_dropped_total',
      help: 'Connections closed by the caps: over the per-address or total limit, evicted (idle, for a new one), or without a request head in time.',
      labelNames: ['reason'],
    });
    const items = metrics.counter({
      name: 'assay_items_total',
      help: 'Results recorded (sync and async), by outcome: clean, flagged (a finding) or error.',
      labelNames: ['outcome'],
    });
    this.items = {
      clean: items.labels('clean'),
      flagged: items.labels('flagged'),
      error: items.labels('error'),
    };
    this.flagged = metrics.counter({
      name: 'assay_flagged_items_total',
      help: 'Results with a finding, by the finding’s category (an item counts once per category).',
      labelNames: ['category'],
    });
    this.scannedBytes = metrics.counter({
      name: 'assay_scanned_bytes_total',
      help: 'Bytes of content scanned to a verdict (content answered by the verdict cache is not).',
    });
    this.engineDuration = metrics.histogram({
      name: 'assay_engine_duration_seconds',
      help: 'Time an engine took to answer for one item; clamav: from the end of the stream.',
      labelNames: ['engine'],
      buckets: ENGINE_BUCKETS,
    });
    this.engineErrors = metrics.counter({
      name: 'assay_engine_errors_total',
      help: 'Items an engine could not answer for (down, erroring, over its time or limits).',
      labelNames: ['engine'],
    });
    const lookups = metrics.counter({
      name: 'assay_verdict_cache_lookups_total',
      help: 'Verdict cache lookups: hit, an earlier verdict answered; miss, the content was scanned.',
      labelNames: ['result'],
    });
    this.verdictLookups = { hit: lookups.labels('hit'), miss: lookups.labels('miss') };
    this.callbacksDelivered = metrics.counter({
      name: 'assay_callbacks_delivered_total',
      help: 'Callbacks delivered (the receiver answered 2xx).',
    });
    this.callbackAttemptsFailed = metrics.counter({
      name: 'assay_callback_attempts_failed_total',
      help: 'Callback attempts that failed (retried later, or the last before giving up).',
    });
    this.callbacksGivenUpCount = metrics.counter({
      name: 'assay_callbacks_failed_total',
      help: 'Callbacks given up, never delivered (too old, undeliverable, account gone).',
    });
    // Every series a dashboard divides by or alerts on exists from the start, at 0.
    for (const counter of [...Object.values(this.items), ...Object.values(this.verdictLookups)]) {
      counter.inc(0);
    }
    for (const category of FINDING_CATEGORIES) this.flagged.inc({ category }, 0);
    for (const reason of ['key-rate-limit', 'authentication-failure-limit', 'sync-scan-capacity']) {
      this.refusals.inc({ reason }, 0);
    }
    for (const reason of ['address-limit', 'limit', 'evicted', 'header-timeout']) {
      this.connectionDrops.inc({ reason }, 0);
    }
    for (const engine of process.engines) this.engineErrors.inc({ engine }, 0);
    this.clustered = inCluster();
    if (this.clustered) shareWithPrimary(metrics.registries);
  }

  /** The ICAP listener's metrics, registered when the listener starts. */
  icap(services: readonly string[]): IcapMetrics {
    return new IcapMetrics(this.metrics, services);
  }

  /** Watched buckets' metrics, registered where buckets are watched. */
  buckets(): BucketMetrics {
    return new BucketMetrics(this.metrics);
  }

  /** Starts reading what is known only at scrape time (the queue, spool, clamd, connections). */
  watch(sources: ScrapeSources): void {
    watchSources(this.metrics, sources);
  }

  /** Starts reading the HTTP server's open connections at scrape time. */
  watchConnections(connections: ConnectionSource): void {
    watchConnections(this.metrics, connections);
  }

  /** The scrape: this process's metrics, or every child's in `serve --processes`. */
  async scrape(): Promise<{ contentType: string; text: string }> {
    const text = this.clustered ? await scrapeCluster() : await this.metrics.text();
    return { contentType: this.metrics.contentType, text };
  }

  /** A request was answered; `route` is its template, never its path. */
  requestServed(method: string, route: string | undefined, status: number, seconds: number): void {
    const template = route ?? UNMATCHED_ROUTE;
    let byMethod = this.routes.get(template);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.routes.set(template, byMethod);
    }
    let series = byMethod.get(method);
    if (series === undefined) {
      series = { duration: this.requestDuration.labels(method, template), byStatus: new Map() };
      byMethod.set(method, series);
    }
    let counter = series.byStatus.get(status);
    if (counter === undefined) {
      counter = this.requests.labels(method, template, String(status));
      series.byStatus.set(status, counter);
    }
    counter.inc();
    series.duration.observe(seconds);
  }

  authenticationFailed(): void {
    this.authenticationFailures.inc();
  }

  requestRefused(reason: Refusal): void {
    this.refusals.inc({ reason });
  }

  connectionDropped(reason: ConnectionDrop): void {
    this.connectionDrops.inc({ reason });
  }

  engineAnswered(engine: string, seconds: number): void {
    let series = this.engines.get(engine);
    if (series === undefined) {
      series = this.engineDuration.labels(engine);
      this.engines.set(engine, series);
    }
    series.observe(seconds);
  }

  engineFailed(engine: string): void {
    this.engineErrors.inc({ engine });
  }

  verdictLookedUp(reused: boolean): void {
    (reused ? this.verdictLookups.hit : this.verdictLookups.miss).inc();
  }

  contentScanned(bytes: number): void {
    this.scannedBytes.inc(bytes);
  }

  itemRecorded(findings: readonly string[] | null): void {
    if (findings === null) {
      this.items.error.inc();
      return;
    }
    if (findings.length === 0) {
      this.items.clean.inc();
      return;
    }
    this.items.flagged.inc();
    const categories = new Set(findings.map(findingCategory));
    for (const category of categories) this.flagged.inc({ category });
  }

  callbackAttempted(outcome: 'delivered' | 'failed'): void {
    if (outcome === 'delivered') this.callbacksDelivered.inc();
    else this.callbackAttemptsFailed.inc();
  }

  callbacksGivenUp(count: number): void {
    if (count > 0) this.callbacksGivenUpCount.inc(count);
  }

  /** Logs why a scrape could not be answered (the answer names no cause). */
  scrapeFailed(error: unknown): void {
    this.logger.error({ err: error }, 'metrics scrape failed');
  }
}
