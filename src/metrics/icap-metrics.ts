import type { Counter, Histogram } from 'prom-client';
import type { MetricsRegistry } from './registry.js';

/** How an ICAP request ended, for `assay_icap_requests_total`. */
export type IcapOutcome =
  | 'options'
  | 'clean'
  | 'flagged'
  | 'no-body'
  | 'oversize-blocked'
  | 'oversize-passed'
  | 'refused'
  | 'error'
  | 'bad-request';

/** An ICAP request: 5 ms (OPTIONS) to 5 minutes (a large body from a slow client). */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The ICAP listener's metrics (registered only when it is on). The service label is a configured
 * service name or `unknown`, so a client cannot grow the series.
 */
export class IcapMetrics {
  private readonly requests: Counter<'method' | 'service' | 'outcome'>;
  private readonly bytes: Counter<'service'>;
  private readonly duration: Histogram<'method'>;
  private readonly refusedConnections: Counter;

  constructor(metrics: MetricsRegistry, services: readonly string[]) {
    this.requests = metrics.counter({
      name: 'assay_icap_requests_total',
      help: 'ICAP requests answered, by method, service (unknown: not configured) and outcome.',
      labelNames: ['method', 'service', 'outcome'],
    });
    this.bytes = metrics.counter({
      name: 'assay_icap_body_bytes_total',
      help: 'Bytes of encapsulated bodies received over ICAP, by service.',
      labelNames: ['service'],
    });
    this.duration = metrics.histogram({
      name: 'assay_icap_request_duration_seconds',
      help: 'Time from an ICAP request’s head to the end of its answer, by method.',
      labelNames: ['method'],
      buckets: BUCKETS,
    });
    this.refusedConnections = metrics.counter({
      name: 'assay_icap_connections_refused_total',
      help: 'ICAP connections closed at once: their address is outside ASSAY_ICAP_ALLOW.',
    });
    this.refusedConnections.inc(0);
    for (const service of services) {
      for (const outcome of ['clean', 'flagged', 'error'] as const) {
        this.requests.inc({ method: 'RESPMOD', service, outcome }, 0);
      }
    }
  }

  served(method: string, service: string, outcome: IcapOutcome, bytes: number, seconds: number) {
    this.requests.inc({ method, service, outcome });
    if (bytes > 0) this.bytes.inc({ service }, bytes);
    this.duration.observe({ method }, seconds);
  }

  connectionRefused(): void {
    this.refusedConnections.inc();
  }
}
