import type { Logger } from 'pino';
import type { DueSignals, WorkDelivery } from '../processing/work-delivery.js';
import type { WorkDispatch } from '../store/work-dispatch.js';
import type { QueueCounts } from './message-queries.js';

/** Announces due work and delivers it: one adapter per backend. */
export interface Dispatch extends WorkDispatch, WorkDelivery, DueSignals {
  start(): Promise<void>;
  /** Waits up to `graceMs` for handlers still running, then lets their work go to others. */
  stop(graceMs: number): Promise<void>;
  /** Messages of each queue, live (the metrics). */
  queueStats(): Promise<Record<string, QueueCounts>>;
}

/**
 * The one place that picks how background work is dispatched: on PostgreSQL, callbacks through
 * pg-boss, and the signals of due jobs on its LISTEN connection (the job runner reads the due
 * list itself on both stores); null for the embedded store, where the callback dispatcher reads
 * its due list too. pg-boss (and pg) is imported only then: a service on SQLite never loads it.
 */
export async function openDispatch(
  settings: { databaseUrl: string; dispatchPoolSize: number; role: string },
  logger: Logger,
): Promise<Dispatch | null> {
  if (settings.databaseUrl === '') return null;
  const { PgBossDispatch } = await import('./pg-boss-dispatch.js');
  return new PgBossDispatch({
    connectionString: settings.databaseUrl,
    poolSize: settings.dispatchPoolSize,
    instanceName: `assay-${settings.role}`,
    // pg-boss's monitor and maintenance run where work runs: an api process only sends.
    supervise: settings.role !== 'api',
    logger,
  });
}
