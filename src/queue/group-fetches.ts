import type { Db } from 'pg-boss';
import { fetchNextJob } from 'pg-boss/dist/plans.js';

/** pg-boss's fetch with group concurrency counts `active_group_…`, and names the queue. */
const GROUP_COUNT = /active_group_(?:count_map|probe)/;
const FETCHED_QUEUE = /j\.name = '([^']+)'/;

/** The queue a statement fetches from with group limits, if it is such a fetch. */
function groupFetchQueue(text: string): string | undefined {
  return GROUP_COUNT.test(text) ? FETCHED_QUEUE.exec(text)?.[1] : undefined;
}

/**
 * pg-boss counts a group's active jobs inside its fetch statement, but two fetches running at once
 * (two slots, two processes) each count before either has claimed, and both claim: perGroup 2 let
 * 3 to 8 run in the test. Fetches of one queue with group limits are serialized here, through a
 * transaction-scoped advisory lock taken before the fetch (at READ COMMITTED the fetch then sees
 * every claim committed before it). A fetch takes about a millisecond, so this caps one queue at
 * some hundreds of claims a second across the deployment, far above what clamd scans.
 */
export function serializeGroupFetches(
  db: Db,
  schema: string,
  /** Told, after a fetch that found nothing, when the queue's next deferred message falls due. */
  onNextDeferred: (queue: string, at: number | null) => void,
): void {
  // The statement is recognized by its text: a pg-boss that words it otherwise fails here, at
  // construction, rather than letting groups overshoot.
  for (const groupConcurrency of [1, 2]) {
    const plan = fetchNextJob({
      schema: 'pgboss',
      table: 'job',
      name: 'probe.queue',
      policy: 'short',
      limit: 1,
      groupConcurrency,
    });
    if (groupFetchQueue(plan.text) !== 'probe.queue') {
      throw new Error('this pg-boss version fetches differently: group fetches not serialized');
    }
  }
  const plain = db.executeSql;
  const begin = db.beginTransaction?.bind(db);
  if (begin === undefined) throw new Error('pg-boss pool without transactions');
  // pg-boss's pool takes a third, internal argument (aborts for its BAM jobs): passed along.
  db.executeSql = async (text: string, values?: unknown[], ...internal: unknown[]) => {
    const queue = groupFetchQueue(text);
    if (queue === undefined) return Reflect.apply(plain, db, [text, values, ...internal]);
    const transaction = await begin();
    try {
      await transaction.db.executeSql('SELECT pg_advisory_xact_lock(hashtext($1))', [
        `assay-group-fetch:${queue}`,
      ]);
      const result = await transaction.db.executeSql(text, values);
      if (result.rows.length === 0) {
        // In the same transaction (no transaction of its own): when to look again, so that a
        // message deferred by another process (a retry it sent, then died) is not left to the poll.
        const next = await transaction.db.executeSql(
          `SELECT (extract(epoch FROM min(start_after)) * 1000)::float8 AS at
           FROM ${schema}.job WHERE name = $1 AND state < 'active' AND start_after > now()`,
          [queue],
        );
        const at = (next.rows[0] as { at: number | null } | undefined)?.at ?? null;
        onNextDeferred(queue, at === null ? null : Number(at));
      }
      await transaction.commit();
      return result;
    } catch (error) {
      await transaction.rollback();
      throw error;
    }
  };
}
