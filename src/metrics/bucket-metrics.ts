import type { Counter, Gauge } from 'prom-client';
import type { MetricsRegistry } from './registry.js';

/** A watched bucket as the metrics name it: its source's name (the operator's, so bounded). */
interface Named {
  name: string;
}

/**
 * Watched buckets' metrics: objects announced (by origin and outcome), verdicts written back (by
 * status; `newly_flagged`: a clean object found to hold a threat by a rescan), threats moved or
 * deleted, failed write-backs, and the SQS messages handled. Labelled by source name.
 */
export class BucketMetrics {
  private readonly announced: Counter<'source' | 'origin' | 'outcome'>;
  private readonly verdicts: Counter<'source' | 'status'>;
  private readonly newlyFlagged: Counter<'source'>;
  private readonly threats: Counter<'source' | 'action'>;
  private readonly writeFailures: Counter<'source' | 'reason'>;
  private readonly messages: Counter<'source' | 'outcome'>;
  private readonly receiveFailures: Counter<'source'>;
  private readonly listedObjects: Counter<'source'>;
  private readonly rescansDue: Gauge<'source'>;

  constructor(metrics: MetricsRegistry) {
    this.rescansDue = metrics.gauge({
      name: 'assay_bucket_rescan_due_objects',
      help: 'Clean objects of a watched bucket still to be scanned again since the signatures changed (within its window), by source: over ASSAY_BUCKET_RESCAN_RATE, how long its rescan takes.',
      labelNames: ['source'],
    });
    this.listedObjects = metrics.counter({
      name: 'assay_bucket_listed_objects_total',
      help: 'Objects seen by the full listings of watched buckets (assay admin bucket scan), by source.',
      labelNames: ['source'],
    });
    this.announced = metrics.counter({
      name: 'assay_bucket_objects_announced_total',
      help: 'Objects of watched buckets announced, by source, origin (event, listing, rescan) and outcome (queued, in-flight, known, outside).',
      labelNames: ['source', 'origin', 'outcome'],
    });
    this.verdicts = metrics.counter({
      name: 'assay_bucket_verdicts_total',
      help: 'Scans of objects of watched buckets that ended, by source and the status written back.',
      labelNames: ['source', 'status'],
    });
    this.newlyFlagged = metrics.counter({
      name: 'assay_bucket_newly_flagged_total',
      help: 'Objects scanned clean before and found to hold a threat when scanned again, by source.',
      labelNames: ['source'],
    });
    this.threats = metrics.counter({
      name: 'assay_bucket_threats_handled_total',
      help: 'Objects holding a threat moved to the quarantine or deleted, by source and action.',
      labelNames: ['source', 'action'],
    });
    this.writeFailures = metrics.counter({
      name: 'assay_bucket_write_failures_total',
      help: 'Verdicts not written back: the bucket not answering (tried again), access denied, or no room among 10 tags.',
      labelNames: ['source', 'reason'],
    });
    this.messages = metrics.counter({
      name: 'assay_bucket_queue_messages_total',
      help: 'SQS messages of watched buckets, by source and outcome (handled, test, malformed, deferred).',
      labelNames: ['source', 'outcome'],
    });
    this.receiveFailures = metrics.counter({
      name: 'assay_bucket_queue_receive_failures_total',
      help: 'Failed receives from the SQS queues of watched buckets, by source.',
      labelNames: ['source'],
    });
  }

  objectAnnounced(source: Named, origin: string, outcome: string): void {
    this.announced.inc({ source: source.name, origin, outcome });
  }

  verdictGiven(source: Named, status: string, previous: string | null): void {
    this.verdicts.inc({ source: source.name, status });
    if (previous === 'NO_THREATS_FOUND' && status === 'THREATS_FOUND') {
      this.newlyFlagged.inc({ source: source.name });
    }
  }

  threatHandled(source: Named, action: 'quarantine' | 'delete'): void {
    this.threats.inc({ source: source.name, action });
  }

  writeFailed(source: Named, reason: string): void {
    this.writeFailures.inc({ source: source.name, reason });
  }

  message(source: Named, outcome: string): void {
    this.messages.inc({ source: source.name, outcome });
  }

  receiveFailed(source: Named): void {
    this.receiveFailures.inc({ source: source.name });
  }

  listed(source: Named, objects: number): void {
    this.listedObjects.inc({ source: source.name }, objects);
  }

  rescanDue(source: Named, objects: number): void {
    this.rescansDue.set({ source: source.name }, objects);
  }
}
