import type { Job, PgBoss } from 'pg-boss';

/** What a message carries: only the id of the row in `jobs` (or the outbox) it is for. */
export interface Message {
  id: string;
}

/** What one fetch found, and, when it found nothing, when the queue's next deferred message falls due. */
export interface Fetched {
  jobs: Job<Message>[];
  nextDeferredAt: number | null;
}

/**
 * A queue's fetches with group limits, one transaction each, serialized across the deployment.
 *
 * pg-boss counts a group's active jobs inside its fetch statement, but two fetches running at once
 * (two processes) each count before either has claimed, and both claim: perGroup 2 let 3 to 8 run
 * in the test. So each fetch first takes a transaction-scoped advisory lock of its queue (at READ
 * COMMITTED the fetch then sees every claim committed before it). A fetch takes about a
 * millisecond, so this caps one queue at some hundreds of fetches a second across the deployment.
 *
 * The messages that finished since the last fetch are completed in the same transaction, before
 * the lock (their groups' counts are then right for the fetch): a worker under load pays one
 * transaction for its completions and its next messages together (issue 28).
 */
export class GroupFetches {
  constructor(
    private readonly boss: PgBoss,
    private readonly schema: string,
  ) {}

  /** Completes `finished` and fetches up to `batchSize` messages of `queue`, in one transaction. */
  async fetch(
    queue: string,
    options: { batchSize: number; groupConcurrency: number },
    finished: Job<Message>[],
  ): Promise<Fetched> {
    const transaction = await this.boss.getDb().beginTransaction?.();
    if (transaction === undefined) throw new Error('pg-boss pool without transactions');
    try {
      const db = transaction.db;
      if (finished.length > 0) await this.boss.complete(queue, finished, { db });
      await db.executeSql('SELECT pg_advisory_xact_lock(hashtext($1))', [
        `assay-group-fetch:${queue}`,
      ]);
      const jobs = await this.boss.fetch<Message>(queue, { ...options, db });
      let nextDeferredAt: number | null = null;
      if (jobs.length === 0) {
        // When to look again, so that a message deferred by another process (a retry it sent,
        // then died) is not left to the poll.
        const next = await db.executeSql(
          `SELECT (extract(epoch FROM min(start_after)) * 1000)::float8 AS at
           FROM ${this.schema}.job WHERE name = $1 AND state < 'active' AND start_after > now()`,
          [queue],
        );
        const at = (next.rows[0] as { at: number | null } | undefined)?.at ?? null;
        nextDeferredAt = at === null ? null : Number(at);
      }
      await transaction.commit();
      return { jobs, nextDeferredAt };
    } catch (error) {
      await transaction.rollback().catch(() => undefined);
      throw error;
    }
  }
}
