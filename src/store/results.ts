import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { StoredFile, TraceEvent } from '../domain/records.js';
import { AccountRepository } from './accounts.js';
import { FileRepository } from './files.js';
import { JobRepository } from './jobs.js';
import { prepared } from './prepared.js';
import type { Database } from './schema.js';
import { TraceRepository } from './trace-events.js';

/** What a finished item writes: its row, its trace, and its charge. */
export interface ResultRows {
  file: StoredFile;
  /** The job this result finishes: written only if this removes the job (it was not finished). */
  jobId?: string;
  /** The verdict cache's key of a result scanned now with a complete verdict. */
  verdictKey: string | null;
  /** Added to the account's balance (negative: a charge); 0 writes nothing. */
  credits: number;
  events: readonly TraceEvent[];
}

/**
 * Finished items in one statement on PostgreSQL: the jobs' delete, the files' insert, their
 * traces' insert (in order: `seq` numbers them) and the charges, as data-modifying CTEs over the
 * items given as JSON, each item written only if its job was still there. Each statement is a
 * round trip, and waking the database costs the service more CPU than the statement costs the
 * database on a small machine: two statements and a transaction's two per item were most of what a
 * worker spent on the store (issue 28).
 */
function finishedItems(items: string, events: string) {
  return sql<{ n: number }>`${prepared}
    WITH input AS (
      SELECT * FROM json_to_recordset(${items}::json) AS r(
        n int, job_id text, id text, account_id text, api_key_id text, checksum text,
        sha256 text, content_length bigint, content_type text, findings text, metadata text,
        callback text, error text, creation_date text, verdict_key text, credits bigint)
    ),
    finished AS (
      DELETE FROM jobs WHERE id IN (SELECT job_id FROM input WHERE job_id IS NOT NULL)
      RETURNING id
    ),
    kept AS (
      SELECT * FROM input WHERE job_id IS NULL OR job_id IN (SELECT id FROM finished)
    ),
    result_file AS (
      INSERT INTO files (id, account_id, api_key_id, checksum, sha256, content_length,
        content_type, findings, metadata, callback, error, creation_date, verdict_key)
      SELECT id, account_id, api_key_id, checksum, sha256, content_length, content_type,
        findings, metadata, callback, error, creation_date, verdict_key
      FROM kept ORDER BY n
    ),
    result_trace AS (
      INSERT INTO trace_events (file_id, timestamp, message)
      SELECT kept.id, e.timestamp, e.message
      FROM json_to_recordset(${events}::json) AS e(n int, ord int, timestamp text, message text)
      JOIN kept ON kept.n = e.n
      ORDER BY e.n, e.ord
    ),
    result_charge AS (
      UPDATE accounts SET balance = accounts.balance + charge.credits
      FROM (SELECT account_id, sum(credits) AS credits FROM kept GROUP BY account_id) charge
      WHERE accounts.id = charge.account_id AND charge.credits <> 0
    )
    SELECT n FROM kept`;
}

/** Writes finished items' rows. */
export class ResultRepository {
  private readonly postgres: boolean;

  constructor(private readonly db: Kysely<Database>) {
    this.postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  }

  /**
   * Writes each item whose job is still there (or that has none), all of them or none: which
   * were written, in order. An item whose job is gone was finished before (by an earlier run that
   * outlived a restart) and writes nothing.
   */
  async recordFinished(items: readonly ResultRows[]): Promise<boolean[]> {
    if (items.length === 0) return [];
    if (this.postgres) return this.recordInOneStatement(items);
    // SQLite runs in the process: a statement costs no round trip there.
    if (this.db.isTransaction) return this.recordEach(items);
    return this.db.transaction().execute((trx) => new ResultRepository(trx).recordEach(items));
  }

  private async recordEach(items: readonly ResultRows[]): Promise<boolean[]> {
    const jobs = new JobRepository(this.db);
    const files = new FileRepository(this.db);
    const accounts = new AccountRepository(this.db);
    const trace = new TraceRepository(this.db);
    const written: boolean[] = [];
    for (const { file, jobId, verdictKey, credits, events } of items) {
      if (jobId !== undefined && !(await jobs.delete(jobId))) {
        written.push(false);
        continue;
      }
      await files.insert(file, verdictKey);
      if (credits !== 0) await accounts.addCredits(file.accountId, credits);
      await trace.appendAll(file.id, events);
      written.push(true);
    }
    return written;
  }

  private async recordInOneStatement(items: readonly ResultRows[]): Promise<boolean[]> {
    const rows = items.map(({ file, jobId, verdictKey, credits }, n) => ({
      n,
      job_id: jobId ?? null,
      id: file.id,
      account_id: file.accountId,
      api_key_id: file.apiKeyId,
      checksum: file.checksum,
      sha256: file.sha256,
      content_length: file.contentLength,
      content_type: file.contentType,
      findings: file.findings === null ? null : JSON.stringify(file.findings),
      metadata: JSON.stringify(file.metadata),
      callback: file.callback,
      error: file.error,
      creation_date: file.creationDate,
      verdict_key: verdictKey,
      credits,
    }));
    const events = items.flatMap(({ events }, n) =>
      events.map((event, ord) => ({ n, ord, timestamp: event.timestamp, message: event.message })),
    );
    const { rows: kept } = await finishedItems(
      JSON.stringify(rows),
      JSON.stringify(events),
    ).execute(this.db);
    const written = new Set(kept.map((row) => Number(row.n)));
    return items.map((_, n) => written.has(n));
  }
}
