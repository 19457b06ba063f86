import type { Job, PgBoss } from 'pg-boss';
import { attemptPairs, completeJobs, fetchNextJob } from 'pg-boss/dist/plans.js';

/** What a message carries: only the id of the row in `jobs` (or the outbox) it is for. */
export interface Message {
  id: string;
}

/** What one fetch found, and, when it found nothing, when the queue's next deferred message falls due. */
export interface Fetched {
  jobs: Job<Message>[];
  nextDeferredAt: number | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** `text` as an SQL string literal (standard_conforming_strings, PostgreSQL's default since 9.1). */
function textLiteral(text: string): string {
  if (text.includes('\0')) throw new Error('a NUL cannot be part of a statement');
  return `'${text.replaceAll("'", "''")}'`;
}

/** A message id pg-boss gave as an SQL literal; anything but a canonical uuid is refused. */
function uuidLiteral(id: string): string {
  if (!UUID.test(id)) throw new Error(`not a message id: ${JSON.stringify(id)}`);
  return `'${id}'`;
}

function integerLiteral(value: unknown): string {
  if (!Number.isSafeInteger(value)) throw new Error(`not an integer: ${String(value)}`);
  return String(value);
}

/**
 * pg-boss's statement with its parameters written in: statements of one simple query (one round
 * trip) cannot take parameters. Every value is a checked uuid, integer or a quoted literal.
 */
function withLiterals(text: string, literals: readonly string[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const literal = literals[Number(n) - 1];
    if (literal === undefined) throw new Error(`pg-boss statement parameter $${n} has no value`);
    return literal;
  });
}

/**
 * A queue's fetches with group limits, serialized across the deployment, each one round trip.
 *
 * pg-boss counts a group's active jobs inside its fetch statement, but two fetches running at once
 * (two processes) each count before either has claimed, and both claim: perGroup 2 let 3 to 8 run
 * in the test. So each fetch first takes a transaction-scoped advisory lock of its queue (at READ
 * COMMITTED the fetch then sees every claim committed before it). A fetch takes about a
 * millisecond, so this caps one queue at some hundreds of fetches a second across the deployment.
 *
 * The messages that finished since the last fetch are completed in the same transaction, before
 * the lock (their groups' counts are then right for the fetch), and the transaction is one simple
 * query of several statements (PostgreSQL runs them as one transaction, and rolls all of them back
 * if one fails): a worker under load pays one round trip for its completions and its next
 * messages together, where it paid five, and waking the database costs more than the statements on
 * a small machine (issue 28). pg-boss's own statements are used (`pg-boss/dist/plans.js`), with
 * their parameters written in as checked literals.
 */
export class GroupFetches {
  private readonly queues = new Map<string, { table: string; policy: string }>();

  constructor(
    private readonly boss: PgBoss,
    private readonly schema: string,
  ) {}

  /**
   * Completes `finished` and fetches up to `batchSize` messages of `queue`, in one transaction.
   * `lookDeferred`: a fetch likely to find nothing (an idle poller's) reads in the same round trip
   * when the queue's next deferred message falls due; any other reads it only if it found nothing.
   */
  async fetch(
    queue: string,
    options: { batchSize: number; groupConcurrency: number; lookDeferred: boolean },
    finished: Job<Message>[],
  ): Promise<Fetched> {
    const { table, policy } = await this.queueOf(queue);
    const statements: string[] = [];
    if (finished.length > 0) {
      const ids = finished.map((job) => job.id);
      const pairs = attemptPairs(
        ids,
        finished.map((job) => Number(integerLiteral(job.retryCount))),
      );
      statements.push(
        withLiterals(completeJobs(this.schema, table, false, true), [
          textLiteral(queue),
          `ARRAY[${ids.map(uuidLiteral).join(',')}]::uuid[]`,
          'NULL',
          `ARRAY[${pairs.map(textLiteral).join(',')}]::text[]`,
        ]),
      );
    }
    statements.push(
      `SELECT pg_advisory_xact_lock(hashtext(${textLiteral(`assay-group-fetch:${queue}`)}))`,
    );
    const plan = fetchNextJob({
      schema: this.schema,
      table,
      name: queue,
      policy,
      limit: options.batchSize,
      groupConcurrency: options.groupConcurrency,
    });
    const fetchAt = statements.length;
    statements.push(withLiterals(plan.text, (plan.values ?? []).map(integerLiteral)));
    if (options.lookDeferred) statements.push(this.nextDeferredStatement(queue));
    const db = this.boss.getDb();
    const results = (await db.executeSql(statements.join(';\n'))) as unknown as Array<{
      rows: unknown[];
    }>;
    const jobs = (results[fetchAt]?.rows ?? []) as Job<Message>[];
    if (jobs.length > 0) return { jobs, nextDeferredAt: null };
    const deferred = options.lookDeferred
      ? results.at(-1)?.rows
      : (await db.executeSql(this.nextDeferredStatement(queue))).rows;
    const at = (deferred?.[0] as { at: number | null } | undefined)?.at ?? null;
    return { jobs, nextDeferredAt: at === null ? null : Number(at) };
  }

  /**
   * When the queue's next deferred message falls due, so that a message deferred by another
   * process (a retry it sent, then died) is not left to the poll. Read with the fetch only when it
   * is likely to find nothing: with a backlog, its scan of the waiting messages cost more than the
   * fetch.
   */
  private nextDeferredStatement(queue: string): string {
    return `SELECT (extract(epoch FROM min(start_after)) * 1000)::float8 AS at
      FROM ${this.schema}.job WHERE name = ${textLiteral(queue)} AND state < 'active'
        AND start_after > now()`;
  }

  private async queueOf(queue: string): Promise<{ table: string; policy: string }> {
    let known = this.queues.get(queue);
    if (known === undefined) {
      const found = await this.boss.getQueue(queue);
      if (found === null) throw new Error(`queue ${queue} does not exist`);
      known = { table: found.table, policy: found.policy ?? 'standard' };
      this.queues.set(queue, known);
    }
    return known;
  }
}
