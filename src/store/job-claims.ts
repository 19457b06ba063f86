import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Job, JobStage } from '../domain/records.js';
import {
  type ClaimedVerdictsColumn,
  claimedVerdictsColumn,
  claimedVerdictsOf,
  type VerdictsToClaim,
} from './claimed-verdicts.js';
import { type JobRow, toJob } from './job-rows.js';
import {
  claimDueJobs,
  claimUnchanged,
  contentOfJob,
  dueOfAccount,
  jobById,
} from './job-statements.js';
import { prepared } from './prepared.js';
import type { Database } from './schema.js';

/** The jobs a process runs now (a claim round leaves them out even if their lease ended). */
export type RunningJobs = Pick<ReadonlyMap<string, unknown>, 'has' | 'keys' | 'size'>;

/** The advisory locks' first key, for claim rounds (the second is the stage). */
const CLAIM_LOCK_SPACE = 0x41737379; // "Assy"

const NONE_RUNNING: RunningJobs = new Map<string, unknown>();

/** A job's row as a claim on PostgreSQL returns it. */
export type ClaimedRow = JobRow & { previous_error: string | null } & ClaimedVerdictsColumn;

/** A claimed row as the job it is: the error its last attempt left, the verdicts found with it. */
export function claimedJob({ previous_error: lastError, verdicts, ...row }: ClaimedRow): Job {
  const job = toJob({ ...row, last_error: lastError });
  const earlierVerdicts = claimedVerdictsOf(verdicts);
  if (earlierVerdicts !== undefined) job.earlierVerdicts = earlierVerdicts;
  return job;
}

/**
 * Claims of jobs: each a lease (`run_after`, the lease's end, with `state` processing) and an
 * attempt counted, taken only if the job may still be claimed when the statement runs, so that of
 * two workers claiming one job only one gets it.
 */
export class JobClaims {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Takes a job that may be claimed by `now` and holds it until `leaseUntil`, counting an attempt;
   * null when it is not claimable (another worker took it first). The job returned carries the
   * attempt count including this one and `lastError` of the previous attempt; the stored error is
   * cleared, so an attempt that never records an outcome (the process died) leaves none.
   */
  async claim(
    id: string,
    now: string,
    leaseUntil: string,
    stage?: JobStage,
    verdicts?: VerdictsToClaim | null,
  ): Promise<Job | null> {
    if (stage !== undefined && this.db.getExecutor().adapter instanceof PostgresAdapter) {
      return (await this.claimMany([id], now, leaseUntil, stage, verdicts)).get(id) ?? null;
    }
    const { rows } = await jobById.execute(this.db, id);
    const row = rows[0];
    if (row === undefined || row.run_after > now) return null;
    if (stage !== undefined && row.stage !== stage) return null;
    return this.claimRow({ ...row, content: null }, leaseUntil);
  }

  /**
   * In a transaction, before a claim round reads the caps: waits for any other process's round of
   * `stage` to commit, so that two rounds never both count an account's jobs before either claims
   * (a transaction-scoped advisory lock on PostgreSQL). SQLite's write lock, taken at a round's
   * start, does this already.
   */
  async lockClaims(stage: JobStage): Promise<void> {
    if (!(this.db.getExecutor().adapter instanceof PostgresAdapter)) return;
    await sql`${prepared} SELECT pg_advisory_xact_lock(${CLAIM_LOCK_SPACE}::int, ${stage === 'scan' ? 1 : 2}::int)`.execute(
      this.db,
    );
  }

  /**
   * Claims up to `limit` of one account's jobs of `stage` that may be claimed by `now`, oldest
   * first, leaving out those `running` here. On PostgreSQL one statement (the candidates, their
   * content and the update); on SQLite one index seek for the candidates, then one conditional
   * update. Either way a job another worker claimed in between is left out.
   */
  async claimDue(
    stage: JobStage,
    accountId: string,
    now: string,
    leaseUntil: string,
    limit: number,
    running: RunningJobs = NONE_RUNNING,
    verdicts?: VerdictsToClaim | null,
  ): Promise<Job[]> {
    if (this.db.getExecutor().adapter instanceof PostgresAdapter) {
      return this.claimDueOnPostgres(stage, accountId, now, leaseUntil, limit, running, verdicts);
    }
    // Jobs running here may be among the oldest due (their lease ended): left out.
    const { rows: due } = await dueOfAccount.execute(
      this.db,
      stage,
      accountId,
      now,
      JSON.stringify([...running.keys()]),
      limit,
    );
    if (due.length === 0) return [];
    // One statement claims them all, each only if it may still be claimed now: in a claim round's
    // transaction on SQLite (write lock held) every row read is.
    const ids = due.map((row) => row.id);
    // In statements of at most claimDueJobs.length ids (a round claims up to its free slots).
    const updated: Array<{ id: string; attempts: number }> = [];
    for (let start = 0; start < ids.length; start += claimDueJobs.length) {
      const chunk = ids.slice(start, start + claimDueJobs.length);
      const template = claimDueJobs[chunk.length - 1];
      if (template === undefined) continue; // unreachable: chunk.length is 1 to the templates'
      updated.push(...(await template.execute(this.db, leaseUntil, now, ...chunk)).rows);
    }
    const attempts = new Map(updated.map((row) => [row.id, row.attempts]));
    const claimed: Job[] = [];
    for (const row of due) {
      const counted = attempts.get(row.id);
      if (counted === undefined) continue;
      const content = await this.contentOf(row.id);
      claimed.push(
        toJob({ ...row, content, state: 'processing', attempts: counted, run_after: leaseUntil }),
      );
    }
    return claimed;
  }

  /**
   * claimDue's one statement on PostgreSQL: a round trip each for the candidates, the update and
   * each job's content was most of a claim's cost. The update checks again that each row may be
   * claimed: a row another worker claimed meanwhile (a hand-off, which takes no claim lock) is
   * checked on the version that worker committed, and left out. `verdicts`: each small upload's
   * earlier verdicts come with it (claimedVerdictsColumn).
   */
  private async claimDueOnPostgres(
    stage: JobStage,
    accountId: string,
    now: string,
    leaseUntil: string,
    limit: number,
    running: RunningJobs,
    verdicts: VerdictsToClaim | null | undefined,
  ): Promise<Job[]> {
    const { rows } = await sql<ClaimedRow>`${prepared}
      WITH due AS (
        SELECT id, last_error FROM jobs
        WHERE stage = ${stage} AND account_id = ${accountId} AND run_after <= ${now}
          AND NOT (id = ANY(${[...running.keys()]}::text[]))
        ORDER BY stage, account_id, run_after LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE jobs SET state = 'processing', attempts = jobs.attempts + 1,
        run_after = ${leaseUntil}, last_error = NULL
      FROM due LEFT JOIN job_contents ON job_contents.job_id = due.id
      WHERE jobs.id = due.id AND jobs.run_after <= ${now}
      RETURNING jobs.*, job_contents.content, due.last_error AS previous_error,
        ${claimedVerdictsColumn(verdicts)}`.execute(this.db);
    return rows.map(claimedJob);
  }

  /**
   * `claim` for several jobs of `stage` at once, by id: one statement on PostgreSQL, a claim each
   * on SQLite. The jobs claimed, by id; one not claimable is left out.
   * On PostgreSQL each row is updated only if it may be claimed now, and comes back with the error
   * its last attempt left (which the claim clears); a concurrent claim makes PostgreSQL check the
   * condition again on the row it committed, so only one of two claims gets a job. (The ids are
   * named on the updated table too: joined only through the CTE, PostgreSQL scanned every job, 2.6
   * ms of its CPU per item with a backlog of 1000.)
   */
  async claimMany(
    ids: readonly string[],
    now: string,
    leaseUntil: string,
    stage: JobStage,
    verdicts?: VerdictsToClaim | null,
  ): Promise<Map<string, Job>> {
    const claimed = new Map<string, Job>();
    if (!(this.db.getExecutor().adapter instanceof PostgresAdapter)) {
      for (const id of ids) {
        const job = await this.claim(id, now, leaseUntil, stage);
        if (job !== null) claimed.set(id, job);
      }
      return claimed;
    }
    const { rows } = await sql<ClaimedRow>`${prepared}
      WITH previous AS (SELECT id, last_error FROM jobs WHERE id = ANY(${[...ids]}::text[]))
      UPDATE jobs SET state = 'processing', attempts = jobs.attempts + 1,
        run_after = ${leaseUntil}, last_error = NULL
      FROM previous LEFT JOIN job_contents ON job_contents.job_id = previous.id
      WHERE jobs.id = ANY(${[...ids]}::text[]) AND jobs.id = previous.id
        AND jobs.run_after <= ${now} AND jobs.stage = ${stage}
      RETURNING jobs.*, job_contents.content, previous.last_error AS previous_error,
        ${claimedVerdictsColumn(verdicts)}`.execute(this.db);
    for (const row of rows) claimed.set(row.id, claimedJob(row));
    return claimed;
  }

  /** A small upload's content kept with its job; null for the others. */
  private async contentOf(id: string): Promise<Buffer | null> {
    const { rows } = await contentOfJob.execute(this.db, id);
    return rows[0]?.content ?? null;
  }

  /** Holds `row`'s job until `leaseUntil`, counting an attempt, if it is unchanged since read. */
  private async claimRow(row: JobRow, leaseUntil: string): Promise<Job | null> {
    const attempts = row.attempts + 1;
    // Unchanged since read (attempts and run_after): another worker did not claim it in between.
    const result = await claimUnchanged.execute(
      this.db,
      attempts,
      leaseUntil,
      row.id,
      row.attempts,
      row.run_after,
    );
    if ((result.numAffectedRows ?? 0n) === 0n) return null;
    const content = row.content ?? (await this.contentOf(row.id));
    return toJob({ ...row, content, state: 'processing', attempts, run_after: leaseUntil });
  }

  /** Extends the leases of jobs this worker is still processing. */
  async renewLeases(ids: readonly string[], leaseUntil: string): Promise<void> {
    if (ids.length === 0) return;
    await this.db
      .updateTable('jobs')
      .set({ run_after: leaseUntil })
      .where('id', 'in', ids)
      .where('state', '=', 'processing')
      .execute();
  }
}
