import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Job, JobStage, StoredFile, TraceEvent } from '../domain/records.js';
import { AccountRepository } from './accounts.js';
import { claimedVerdictsColumn, type VerdictsToClaim } from './claimed-verdicts.js';
import { FileRepository } from './files.js';
import { type ClaimedRow, claimedJob } from './job-claims.js';
import { JobRepository } from './jobs.js';
import { prepared } from './prepared.js';
import type { Database } from './schema.js';
import { inlineTrace, TraceRepository } from './trace-events.js';

/** What a finished item writes: its row, its trace, and its charge. */
export interface ResultRows {
  file: StoredFile;
  /** The job this result finishes: written only if this removes the job (it was not finished). */
  jobId?: string;
  /** The verdict cache's key of a result scanned now with a complete verdict. */
  verdictKey: string | null;
  /** Added to the account's balance (negative: a charge); 0 writes nothing. */
  credits: number;
  /**
   * The result's events. Written with its row (inlineTrace) when it has no job, so no event came
   * before them; a job's events follow the rows written while it ran.
   */
  events: readonly TraceEvent[];
}

/**
 * Due jobs of one account claimed with a group of results (the slots of its ending jobs handed
 * on: ClaimShortcuts), oldest first, leaving out `skip` (running in the process) and the jobs the
 * results finish: JobClaims.claimDue's claim, in the results' commit.
 */
export interface ClaimWithResults {
  stage: JobStage;
  accountId: string;
  limit: number;
  now: string;
  leaseUntil: string;
  skip: readonly string[];
  /** Each small upload's earlier verdicts come with it (claimedVerdictsColumn). */
  verdicts?: VerdictsToClaim | null;
}

/**
 * Finished items in one statement on PostgreSQL: the jobs' delete, the files' insert, their
 * traces' insert (in order: `seq` numbers them) and the charges, as data-modifying CTEs over the
 * items given as JSON, each item written only if its job was still there. Each statement is a
 * round trip, and waking the database costs the service more CPU than the statement costs the
 * database on a small machine: two statements and a transaction's two per item were most of what a
 * worker spent on the store (issue 28). The jobs are named by an array too: through the JSON
 * alone, PostgreSQL's generic plan scanned every job (its estimate of a JSON's rows is 100).
 */
function finishedItems(
  items: string,
  jobIds: readonly string[],
  events: string,
  claim?: ClaimWithResults,
) {
  return sql<{
    n: number | null;
    job: (Omit<ClaimedRow, 'content'> & { content: string | null }) | null;
  }>`${prepared}
    WITH input AS (
      SELECT * FROM json_to_recordset(${items}::json) AS r(
        n int, job_id text, id text, account_id text, api_key_id text, checksum text,
        sha256 text, content_length bigint, content_type text, findings text, metadata text,
        callback text, error text, creation_date text, verdict_key text, credits bigint,
        file_name text, trace text)
    ),
    finished AS (
      DELETE FROM jobs WHERE id = ANY(${jobIds}::text[]) RETURNING id
    ),
    kept AS (
      SELECT * FROM input WHERE job_id IS NULL OR job_id IN (SELECT id FROM finished)
    ),
    result_file AS (
      INSERT INTO files (id, account_id, api_key_id, checksum, sha256, content_length,
        content_type, findings, metadata, callback, error, creation_date, verdict_key, file_name,
        trace)
      SELECT id, account_id, api_key_id, checksum, sha256, content_length, content_type,
        findings, metadata, callback, error, creation_date, verdict_key, file_name, trace
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
    ${claim === undefined ? sql`SELECT n, NULL::jsonb AS job FROM kept` : claimWith(claim, jobIds)}`;
}

/** finishedItems' claim (ClaimWithResults): the jobs it claims come back as JSON, beside `kept`. */
function claimWith(claim: ClaimWithResults, finishing: readonly string[]) {
  return sql`,
    due AS (
      SELECT id, last_error FROM jobs
      WHERE stage = ${claim.stage} AND account_id = ${claim.accountId}
        AND run_after <= ${claim.now} AND NOT (id = ANY(${[...claim.skip]}::text[]))
        AND NOT (id = ANY(${finishing}::text[]))
      ORDER BY stage, account_id, run_after LIMIT ${claim.limit}
      FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE jobs SET state = 'processing', attempts = jobs.attempts + 1,
        run_after = ${claim.leaseUntil}, last_error = NULL
      FROM due LEFT JOIN job_contents ON job_contents.job_id = due.id
      WHERE jobs.id = due.id AND jobs.run_after <= ${claim.now}
      RETURNING jobs.*, job_contents.content, due.last_error AS previous_error,
        ${claimedVerdictsColumn(claim.verdicts)}
    )
    SELECT n, NULL::jsonb AS job FROM kept
    UNION ALL SELECT NULL, to_jsonb(claimed) FROM claimed`;
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
    return (await this.recordFinishedClaiming(items)).written;
  }

  /**
   * `recordFinished`, and with the same commit `claim` (if any): the jobs claimed. One statement
   * on PostgreSQL, where a transaction around the results and a claim of their own was four round
   * trips that held the ending jobs' slots (issue 28).
   */
  async recordFinishedClaiming(
    items: readonly ResultRows[],
    claim?: ClaimWithResults,
  ): Promise<{ written: boolean[]; claimed: Job[] }> {
    if (items.length === 0) return { written: [], claimed: [] };
    if (this.postgres) return this.recordInOneStatement(items, claim);
    // SQLite runs in the process: a statement costs no round trip there.
    if (!this.db.isTransaction) {
      return this.db
        .transaction()
        .execute((trx) => new ResultRepository(trx).recordFinishedClaiming(items, claim));
    }
    const written = await this.recordEach(items);
    if (claim === undefined) return { written, claimed: [] };
    const running = new Map(claim.skip.map((id) => [id, null]));
    const claimed = await new JobRepository(this.db).claimDue(
      claim.stage,
      claim.accountId,
      claim.now,
      claim.leaseUntil,
      claim.limit,
      running,
    );
    return { written, claimed };
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
      await files.insert(file, verdictKey, jobId === undefined ? inlineTrace(events) : null);
      if (credits !== 0) await accounts.addCredits(file.accountId, credits);
      if (jobId !== undefined) await trace.appendAll(file.id, events);
      written.push(true);
    }
    return written;
  }

  private async recordInOneStatement(
    items: readonly ResultRows[],
    claim: ClaimWithResults | undefined,
  ): Promise<{ written: boolean[]; claimed: Job[] }> {
    const rows = items.map(({ file, jobId, verdictKey, credits, events }, n) => ({
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
      file_name: file.fileName ?? null,
      trace: jobId === undefined ? inlineTrace(events) : null,
    }));
    const events = items.flatMap(({ events, jobId }, n) =>
      jobId === undefined
        ? []
        : events.map((event, ord) => ({
            n,
            ord,
            timestamp: event.timestamp,
            message: event.message,
          })),
    );
    const jobIds = items.flatMap(({ jobId }) => (jobId === undefined ? [] : [jobId]));
    const { rows: out } = await finishedItems(
      JSON.stringify(rows),
      jobIds,
      JSON.stringify(events),
      claim,
    ).execute(this.db);
    const written = new Set(out.filter((row) => row.n !== null).map((row) => Number(row.n)));
    const claimed: Job[] = [];
    for (const { job } of out) {
      if (job === null) continue;
      // bytea in JSON is its hex form, `\x…`.
      const { content } = job;
      claimed.push(
        claimedJob({
          ...job,
          content: content === null ? null : Buffer.from(content.slice(2), 'hex'),
        }),
      );
    }
    return { written: items.map((_, n) => written.has(n)), claimed };
  }
}
