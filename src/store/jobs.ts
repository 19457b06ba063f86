import { type Kysely, PostgresAdapter } from 'kysely';
import type { Job, JobStage } from '../domain/records.js';
import { AccountRepository } from './accounts.js';
import type { VerdictsToClaim } from './claimed-verdicts.js';
import { type Acceptance, acceptGroup, stageOf } from './job-acceptance.js';
import { JobClaims, type RunningJobs } from './job-claims.js';
import { toJob } from './job-rows.js';
import {
  deleteJob,
  downloadedPerAccount,
  earliestRunAfter,
  inFlightOfAccount,
  inFlightPerAccount,
  insertJob,
  insertJobContent,
  nextDueAfterAccount,
  spooledBytesOf,
  withContent,
} from './job-statements.js';
import type { Database } from './schema.js';
import { TraceRepository } from './trace-events.js';
import { type DueJob, type WorkDispatch, withDispatch } from './work-dispatch.js';

/**
 * Tells the processes that run `due`'s stage (PostgreSQL: a NOTIFY with the commit) of a job that
 * is pending and due by now; one due later is found by the look its releaser schedules, or a poll.
 */
async function signalIfDue(
  db: Kysely<Database>,
  dispatch: WorkDispatch | undefined,
  due: DueJob,
  job: { state: string; runAfter: string },
): Promise<void> {
  if (dispatch?.signal === undefined || !dueNow(job, new Date().toISOString())) return;
  await dispatch.signal(db, due);
}

/** A job that is pending and due by `now` (ISO): the ones signalled. */
function dueNow(job: { state: string; runAfter: string }, now: string): boolean {
  return job.state === 'pending' && job.runAfter <= now;
}

export class JobRepository {
  private readonly claims: JobClaims;

  /** `dispatch`: told of every job that becomes due now, in the same transaction (PostgreSQL). */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dispatch?: WorkDispatch,
  ) {
    this.claims = new JobClaims(db);
  }

  async insert(job: Job): Promise<void> {
    const stage = stageOf(job);
    await withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      await this.insertRow(db, job, stage);
      await signalIfDue(db, dispatch, { kind: stage, accountId: job.accountId }, job);
    });
  }

  /**
   * Accepts an item: takes one credit from its account (unless it enforces its balance and has none
   * left: false, and nothing is written), stores its job and the job's first trace event, and
   * signals it (PostgreSQL), in the caller's transaction. On PostgreSQL the credit, the job and the
   * event are one statement: three round trips per accepted item were most of an api process's
   * store work.
   */
  async accept(job: Job, received: Acceptance['received']): Promise<boolean> {
    const stage = stageOf(job);
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      if (db.getExecutor().adapter instanceof PostgresAdapter) {
        const { rows } = await acceptGroup([{ job, received }], null).execute(db);
        if (rows.length === 0) return false;
      } else {
        if (!(await new AccountRepository(db).takeCredit(job.accountId))) return false;
        await this.insertRow(db, { ...job, creditHeld: true }, stage);
        await new TraceRepository(db).append(job.id, received.message, received.timestamp);
      }
      await signalIfDue(db, dispatch, { kind: stage, accountId: job.accountId }, job);
      return true;
    });
  }

  /**
   * `accept` for items accepted together: which were (false: the balance was spent). On PostgreSQL
   * one statement for all of them, their signals included, outside any transaction: one round trip
   * and one commit instead of a transaction's begin, a statement per item, the signals and the
   * commit. An account whose balance could not pay for all its items there has them accepted
   * one at a time after it, as far as its balance goes. Elsewhere `accept` each, in one transaction.
   */
  async acceptMany(items: readonly Acceptance[]): Promise<boolean[]> {
    if (items.length === 0) return [];
    const signalQuery = this.dispatch?.signalQuery?.bind(this.dispatch);
    const postgres = this.db.getExecutor().adapter instanceof PostgresAdapter;
    // In a transaction (or without a query for the signals) the statement cannot be alone.
    if (!postgres || this.db.isTransaction || (this.dispatch !== undefined && !signalQuery)) {
      return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
        const jobs = new JobRepository(db, dispatch);
        const accepted: boolean[] = [];
        for (const { job, received } of items) accepted.push(await jobs.accept(job, received));
        return accepted;
      });
    }
    const now = new Date().toISOString();
    const dues = new Map<string, DueJob>();
    for (const { job } of items) {
      if (!dueNow(job, now)) continue;
      const due = { kind: stageOf(job), accountId: job.accountId };
      dues.set(`${due.kind}\0${due.accountId}`, due);
    }
    const signals =
      signalQuery !== undefined && dues.size > 0 ? signalQuery([...dues.values()]) : null;
    const { rows } = await acceptGroup(items, signals).execute(this.db);
    const taken = new Set(rows.map((row) => Number(row.n)));
    const accepted: boolean[] = [];
    for (const [n, { job, received }] of items.entries()) {
      // Refused with its account's other items here: alone, it may still fit the balance.
      accepted.push(taken.has(n) || (await this.accept(job, received)));
    }
    return accepted;
  }

  private async insertRow(db: Kysely<Database>, job: Job, stage: JobStage): Promise<void> {
    await insertJob.execute(
      db,
      job.id,
      job.accountId,
      job.apiKeyId,
      job.apiVersion,
      job.kind,
      job.state,
      job.location,
      job.spoolKey,
      JSON.stringify(job.metadata),
      job.callback,
      job.attempts,
      job.runAfter,
      job.creationDate,
      job.legacy ? JSON.stringify(job.legacy) : null,
      job.lastError ?? null,
      job.size ?? 0,
      job.creditHeld === true ? 1 : 0,
      stage,
      job.fileName ?? null,
    );
    if (job.content != null) await insertJobContent.execute(db, job.id, job.content);
  }

  /** Bytes held in the spool by unfinished jobs: in all, and of one account. */
  async spooledBytes(accountId: string): Promise<{ total: number; account: number }> {
    const { rows } = await spooledBytesOf.execute(this.db, accountId);
    return { total: Number(rows[0]?.total ?? 0), account: Number(rows[0]?.account ?? 0) };
  }

  /** Bytes held in the spool by unfinished jobs: in all, and by the account holding the most. */
  async spoolUsage(): Promise<{ total: number; largestAccount: number }> {
    const perAccount = this.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.sum<number>('size').as('held'))
      .groupBy('account_id')
      .as('per_account');
    const row = await this.db
      .selectFrom(perAccount)
      .select((eb) => [
        eb.fn.coalesce(eb.fn.sum<number>('held'), eb.lit(0)).as('total'),
        eb.fn.coalesce(eb.fn.max<number>('held'), eb.lit(0)).as('largest'),
      ])
      .executeTakeFirstOrThrow();
    return { total: Number(row.total), largestAccount: Number(row.largest) };
  }

  /** Whether a job with this id exists (finished jobs are deleted). */
  async exists(id: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('jobs')
      .select('id')
      .where('id', '=', id)
      .executeTakeFirst();
    return row !== undefined;
  }

  async findForAccount(accountId: string, id: string): Promise<Job | null> {
    const row = await withContent(this.db)
      .where('jobs.id', '=', id)
      .where('jobs.account_id', '=', accountId)
      .executeTakeFirst();
    return row ? toJob(row) : null;
  }

  /**
   * The oldest job of `stage` that may be claimed by `now` (pending and due, or processing with an
   * expired lease) of the first account after `afterAccount` in id order that has one. Called with
   * the last account served, it walks the accounts round-robin, each step one index seek.
   */
  async nextDueAfter(
    stage: JobStage,
    afterAccount: string,
    now: string,
  ): Promise<{ id: string; accountId: string } | null> {
    const { rows } = await nextDueAfterAccount.execute(this.db, stage, afterAccount, now);
    const row = rows[0];
    return row === undefined ? null : { id: row.id, accountId: row.account_id };
  }

  /** Jobs in flight (processing, lease not expired), of every stage and worker. */
  async inFlight(now: string): Promise<number> {
    const row = await this.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', '=', 'processing')
      .where('run_after', '>', now)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /** Jobs of `stage` in flight (processing, lease not expired) per account, across every worker. */
  async inFlightByAccount(stage: JobStage, now: string): Promise<Map<string, number>> {
    const { rows } = await inFlightPerAccount.execute(this.db, now, stage);
    return new Map(rows.map((row) => [row.account_id, Number(row.count)]));
  }

  /** `inFlightByAccount` for one account: its jobs of `stage` processing with a live lease. */
  async inFlightOfAccount(stage: JobStage, accountId: string, now: string): Promise<number> {
    const { rows } = await inFlightOfAccount.execute(this.db, now, stage, accountId);
    return Number(rows[0]?.count ?? 0);
  }

  /**
   * Fetches per account that hold downloaded content in the spool, waiting for (or in) their
   * scan: with the downloads in flight, what an account's download cap counts, so downloads
   * cannot run ahead of the scans and fill the disk.
   */
  async downloadedByAccount(): Promise<Map<string, number>> {
    const { rows } = await downloadedPerAccount.execute(this.db);
    return new Map(rows.map((row) => [row.account_id, Number(row.count)]));
  }

  /**
   * A claimed fetch whose content is now in the spool moves to the scan stage, due at once. Its
   * attempt is refunded: the download worked, and the scan's claim counts one of its own. False
   * when no such job is being downloaded (its account was erased meanwhile, say).
   */
  async downloaded(
    id: string,
    spool: { key: string; size: number },
    now: string,
  ): Promise<boolean> {
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      const row = await db
        .updateTable('jobs')
        .set((eb) => ({
          stage: 'scan',
          state: 'pending',
          spool_key: spool.key,
          size: spool.size,
          run_after: now,
          attempts: eb('attempts', '-', 1),
        }))
        .where('id', '=', id)
        .where('state', '=', 'processing')
        .where('stage', '=', 'download')
        .returning('account_id')
        .executeTakeFirst();
      if (row === undefined) return false;
      await dispatch?.signal?.(db, { kind: 'scan', accountId: row.account_id });
      return true;
    });
  }

  /**
   * Jobs that may be claimed by `now` (pending and due, or processing with an expired lease), and
   * the earliest moment one of them fell due; for a worker's readiness report.
   */
  async dueSummary(now: string): Promise<{ count: number; oldest: string | null }> {
    const row = await this.db
      .selectFrom('jobs')
      .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.min('run_after').as('oldest')])
      .where('run_after', '<=', now)
      .executeTakeFirst();
    return { count: Number(row?.count ?? 0), oldest: row?.oldest ?? null };
  }

  /**
   * The earliest moment a job of `stage` may be claimed (a due time or the end of a lease), if
   * any.
   */
  async nextDue(stage: JobStage): Promise<string | null> {
    const { rows } = await earliestRunAfter.execute(this.db, stage);
    return rows[0]?.next ?? null;
  }

  /** See JobClaims.claim. */
  claim(
    id: string,
    now: string,
    leaseUntil: string,
    stage?: JobStage,
    verdicts?: VerdictsToClaim | null,
  ): Promise<Job | null> {
    return this.claims.claim(id, now, leaseUntil, stage, verdicts);
  }

  /** See JobClaims.lockClaims. */
  lockClaims(stage: JobStage): Promise<void> {
    return this.claims.lockClaims(stage);
  }

  /** See JobClaims.claimDue. */
  claimDue(
    stage: JobStage,
    accountId: string,
    now: string,
    leaseUntil: string,
    limit: number,
    running?: RunningJobs,
    verdicts?: VerdictsToClaim | null,
  ): Promise<Job[]> {
    return this.claims.claimDue(stage, accountId, now, leaseUntil, limit, running, verdicts);
  }

  /** See JobClaims.renewLeases. */
  renewLeases(ids: readonly string[], leaseUntil: string): Promise<void> {
    return this.claims.renewLeases(ids, leaseUntil);
  }

  /**
   * Puts a claimed job back to wait until `runAfter`. `refund`: the attempt does not count (the
   * engine was down for everyone, or shutdown parked the job); else `error` says why it failed.
   * True when the job was put back.
   */
  async release(
    id: string,
    runAfter: string,
    outcome: { refund: true } | { refund: false; error: string },
  ): Promise<boolean> {
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      const row = await db
        .updateTable('jobs')
        .set((eb) => ({
          state: 'pending',
          run_after: runAfter,
          ...(outcome.refund
            ? { attempts: eb('attempts', '-', 1) }
            : { last_error: outcome.error }),
        }))
        .where('id', '=', id)
        .where('state', '=', 'processing')
        .returning(['account_id', 'stage'])
        .executeTakeFirst();
      if (row === undefined) return false;
      const due = { kind: row.stage as JobStage, accountId: row.account_id };
      await signalIfDue(db, dispatch, due, { state: 'pending', runAfter });
      return true;
    });
  }

  /** The job's row as it is now (null once it is finished). */
  async find(id: string): Promise<Job | null> {
    const row = await withContent(this.db).where('jobs.id', '=', id).executeTakeFirst();
    return row === undefined ? null : toJob(row);
  }

  /** False when there was no such job. */
  async delete(id: string): Promise<boolean> {
    const result = await deleteJob.execute(this.db, id);
    return (result.numAffectedRows ?? 0n) > 0n;
  }
}
