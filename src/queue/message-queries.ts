import { type Kysely, sql } from 'kysely';
import type { PgBoss } from 'pg-boss';
import type { Database } from '../store/schema.js';

export interface QueueCounts {
  /** Waiting and due (including jobs waiting for a retry). */
  queued: number;
  /** Waiting for a later start (`startAfter`). */
  deferred: number;
  /** Held by a worker now. */
  active: number;
}

/**
 * Reads of pg-boss's messages that pg-boss has no call for: by the row each names (its singleton
 * key is the row's id), and live counts per queue.
 */
export class MessageQueries {
  constructor(
    private readonly boss: PgBoss,
    private readonly schema: string,
  ) {}

  private get table() {
    return sql.table(`${this.schema}.job`);
  }

  /** Which of these rows a message of `queue` waits for (created or to be retried). */
  async waitingRows(db: Kysely<Database>, queue: string, rowIds: string[]): Promise<Set<string>> {
    if (rowIds.length === 0) return new Set();
    const { rows } = await sql<{ key: string }>`
      SELECT singleton_key AS key FROM ${this.table}
      WHERE name = ${queue} AND state < 'active'
        AND singleton_key = ANY(${rowIds}::text[])`.execute(db);
    return new Set(rows.map((row) => row.key));
  }

  /**
   * Live counts per queue (pg-boss's getQueueStats serves a cache up to a monitor pass old). One
   * indexed scan of the unfinished messages.
   */
  async counts(queues: readonly string[]): Promise<Record<string, QueueCounts>> {
    const { rows } = await this.boss.getDb().executeSql(
      `SELECT name,
          count(*) FILTER (WHERE state < 'active' AND start_after <= now())::int AS queued,
          count(*) FILTER (WHERE state < 'active' AND start_after > now())::int AS deferred,
          count(*) FILTER (WHERE state = 'active')::int AS active
        FROM ${this.schema}.job
        WHERE name = ANY($1::text[]) AND state <= 'active'
        GROUP BY name`,
      [[...queues]],
    );
    const stats: Record<string, QueueCounts> = {};
    for (const name of queues) stats[name] = { queued: 0, deferred: 0, active: 0 };
    for (const row of rows as Array<QueueCounts & { name: string }>) {
      stats[row.name] = { queued: row.queued, deferred: row.deferred, active: row.active };
    }
    return stats;
  }
}
