import { type Kysely, PostgresAdapter, type Selectable, sql } from 'kysely';
import type { Job, JobKind, JobStage, LegacyJobOptions } from '../domain/records.js';
import { AccountRepository } from './accounts.js';
import { announce, JobAnnouncements } from './job-announcements.js';
import {
  claimDueJobs,
  claimUnchanged,
  contentOfJob,
  deleteJob,
  downloadedPerAccount,
  dueOfAccount,
  earliestRunAfter,
  inFlightOfAccount,
  inFlightPerAccount,
  insertJob,
  insertJobContent,
  jobById,
  nextDueAfterAccount,
  spooledBytesOf,
  withContent,
} from './job-statements.js';
import { prepared } from './prepared.js';
import type { Database, JobsTable } from './schema.js';
import { TraceRepository } from './trace-events.js';
import { type WorkDispatch, withDispatch } from './work-dispatch.js';

/** A job's row with its content, if the store keeps it (job_contents). */
type JobRow = Selectable<JobsTable> & { content: Buffer | null };

function toJob(row: JobRow): Job {
  return {
    id: row.id,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    apiVersion: row.api_version,
    kind: row.kind as JobKind,
    state: row.state as Job['state'],
    location: row.location,
    spoolKey: row.spool_key,
    content: row.content,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    callback: row.callback,
    attempts: row.attempts,
    runAfter: row.run_after,
    creationDate: row.creation_date,
    legacy: row.legacy === null ? null : (JSON.parse(row.legacy) as LegacyJobOptions),
    lastError: row.last_error,
    size: Number(row.size),
    creditHeld: row.credit_held === 1,
    stage: row.stage as JobStage,
  };
}

export class JobRepository {
  /** In a transaction: the rank each stage and account's last inserted job was announced with. */
  private readonly insertRanks = new Map<string, number>();

  private readonly announcements: JobAnnouncements | undefined;

  /** `dispatch`: told of every job that becomes due, in the same transaction (PostgreSQL). */
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dispatch?: WorkDispatch,
  ) {
    this.announcements = dispatch === undefined ? undefined : new JobAnnouncements(db, dispatch);
  }

  async insert(job: Job): Promise<void> {
    // A fetch is downloaded into the spool first; content already there goes to the scan.
    const stage: JobStage = job.kind === 'fetch' && job.spoolKey === null ? 'download' : 'scan';
    await withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      await this.insertRow(db, job, stage);
      const work = { kind: stage, id: job.id, accountId: job.accountId, at: job.runAfter };
      // A repository bound to a transaction lives as long as it: its inserts may share a count.
      await announce(db, dispatch, work, this.db.isTransaction ? this.insertRanks : undefined);
    });
  }

  /**
   * Accepts an item: takes one credit from its account (unless it enforces its balance and has none
   * left: false, and nothing is written), stores its job and the job's first trace event, and
   * announces it, in the caller's transaction. On PostgreSQL the credit, the job and the event are
   * one statement: three round trips per accepted item were most of an api process's store work.
   */
  async accept(job: Job, received: { timestamp: string; message: string }): Promise<boolean> {
    const stage: JobStage = job.kind === 'fetch' && job.spoolKey === null ? 'download' : 'scan';
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      if (db.getExecutor().adapter instanceof PostgresAdapter) {
        const { rows } = await sql<{ taken: number }>`${prepared}
          WITH credit AS (
            UPDATE accounts SET balance = balance - 1
            WHERE id = ${job.accountId} AND (enforce_balance = 0 OR balance >= 1)
            RETURNING id
          ),
          job AS (
            INSERT INTO jobs (id, account_id, api_key_id, api_version, kind, state, location,
              spool_key, metadata, callback, attempts, run_after, creation_date, legacy,
              last_error, size, credit_held, stage)
            SELECT ${job.id}, ${job.accountId}, ${job.apiKeyId}, ${job.apiVersion}, ${job.kind},
              ${job.state}, ${job.location}::text, ${job.spoolKey}::text,
              ${JSON.stringify(job.metadata)},
              ${job.callback}::text, ${job.attempts}::int, ${job.runAfter}, ${job.creationDate},
              ${job.legacy ? JSON.stringify(job.legacy) : null}::text,
              ${job.lastError ?? null}::text, ${job.size ?? 0}::bigint, 1, ${stage}
            WHERE EXISTS (SELECT 1 FROM credit)
          ),
          content AS (
            INSERT INTO job_contents (job_id, content)
            SELECT ${job.id}, ${job.content ?? null}::bytea
            WHERE ${job.content ?? null}::bytea IS NOT NULL AND EXISTS (SELECT 1 FROM credit)
          ),
          received AS (
            INSERT INTO trace_events (file_id, timestamp, message)
            SELECT ${job.id}, ${received.timestamp}, ${received.message}
            WHERE EXISTS (SELECT 1 FROM credit)
          )
          SELECT count(*)::int AS taken FROM credit`.execute(db);
        if (Number(rows[0]?.taken ?? 0) === 0) return false;
      } else {
        if (!(await new AccountRepository(db).takeCredit(job.accountId))) return false;
        await this.insertRow(db, { ...job, creditHeld: true }, stage);
        await new TraceRepository(db).append(job.id, received.message, received.timestamp);
      }
      const work = { kind: stage, id: job.id, accountId: job.accountId, at: job.runAfter };
      await announce(db, dispatch, work, this.db.isTransaction ? this.insertRanks : undefined);
      return true;
    });
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
      await announce(db, dispatch, { kind: 'scan', id, accountId: row.account_id, at: now });
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

  /**
   * Takes a job that may be claimed by `now` and holds it until `leaseUntil`, counting an attempt;
   * null when it is not claimable (another worker took it first). The job returned carries the
   * attempt count including this one and `lastError` of the previous attempt; the stored error is
   * cleared, so an attempt that never records an outcome (the process died) leaves none.
   */
  async claim(id: string, now: string, leaseUntil: string, stage?: JobStage): Promise<Job | null> {
    if (stage !== undefined && this.db.getExecutor().adapter instanceof PostgresAdapter) {
      return (await this.claimMany([id], now, leaseUntil, stage)).get(id) ?? null;
    }
    const { rows } = await jobById.execute(this.db, id);
    const row = rows[0];
    if (row === undefined || row.run_after > now) return null;
    if (stage !== undefined && row.stage !== stage) return null;
    return this.claimRow({ ...row, content: null }, leaseUntil);
  }

  /**
   * Claims up to `limit` of one account's jobs of `stage` that may be claimed by `now`, oldest
   * first, skipping those `skip` names (running here). One index seek for the candidates, then one
   * conditional update: a job another worker claimed in between is left out.
   */
  async claimDue(
    stage: JobStage,
    accountId: string,
    now: string,
    leaseUntil: string,
    limit: number,
    skip: (id: string) => boolean = () => false,
  ): Promise<Job[]> {
    const { rows } = await dueOfAccount.execute(this.db, stage, accountId, now, limit);
    const due = rows.filter((row) => !skip(row.id));
    if (due.length === 0) return [];
    // One statement claims them all, each only if it may still be claimed now: in a claim round's
    // transaction on SQLite (write lock held) every row read is; elsewhere one claimed meanwhile
    // by another worker is left out.
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
   * `claim` for several jobs of `stage` at once (the messages of one fetch): one statement on
   * PostgreSQL, a claim each on SQLite. The jobs claimed, by id; one not claimable is left out.
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
  ): Promise<Map<string, Job>> {
    const claimed = new Map<string, Job>();
    if (!(this.db.getExecutor().adapter instanceof PostgresAdapter)) {
      for (const id of ids) {
        const job = await this.claim(id, now, leaseUntil, stage);
        if (job !== null) claimed.set(id, job);
      }
      return claimed;
    }
    const { rows } = await sql<JobRow & { previous_error: string | null }>`${prepared}
      WITH previous AS (SELECT id, last_error FROM jobs WHERE id = ANY(${[...ids]}::text[]))
      UPDATE jobs SET state = 'processing', attempts = jobs.attempts + 1,
        run_after = ${leaseUntil}, last_error = NULL
      FROM previous LEFT JOIN job_contents ON job_contents.job_id = previous.id
      WHERE jobs.id = ANY(${[...ids]}::text[]) AND jobs.id = previous.id
        AND jobs.run_after <= ${now} AND jobs.stage = ${stage}
      RETURNING jobs.*, job_contents.content, previous.last_error AS previous_error`.execute(
      this.db,
    );
    for (const { previous_error: lastError, ...row } of rows) {
      claimed.set(row.id, toJob({ ...row, last_error: lastError }));
    }
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

  /**
   * Puts a claimed job back to wait until `runAfter`. `refund`: the attempt does not count (the
   * engine was down for everyone, or shutdown parked the job); else `error` says why it failed.
   * `leasedUntil`: only if the job's lease ends then, i.e. it is still held by the claim that set
   * that lease (a claim whose answer was lost); true when the job was put back.
   */
  async release(
    id: string,
    runAfter: string,
    outcome: { refund: true; leasedUntil?: string } | { refund: false; error: string },
  ): Promise<boolean> {
    return withDispatch(this.db, this.dispatch, async (db, dispatch) => {
      let update = db
        .updateTable('jobs')
        .set((eb) => ({
          state: 'pending',
          run_after: runAfter,
          ...(outcome.refund
            ? { attempts: eb('attempts', '-', 1) }
            : { last_error: outcome.error }),
        }))
        .where('id', '=', id)
        .where('state', '=', 'processing');
      if (outcome.refund && outcome.leasedUntil !== undefined) {
        update = update.where('run_after', '=', outcome.leasedUntil);
      }
      const row = await update.returning(['account_id', 'stage']).executeTakeFirst();
      if (row === undefined) return false;
      const kind = row.stage as JobStage;
      await announce(db, dispatch, { kind, id, accountId: row.account_id, at: runAfter });
      return true;
    });
  }

  /**
   * Announces jobs again (through the dispatch), each due at its `run_after`: one (`id`), or at
   * start every job no live worker holds that has no announcement waiting (JobAnnouncements).
   */
  redispatch(which: { unheldAt: string } | { id: string }): Promise<number> {
    return this.announcements?.redispatch(which) ?? Promise.resolve(0);
  }

  /** Announces the jobs whose lease ended by `now`, and says when to look again (JobAnnouncements). */
  announceEndedLeases(now: string): Promise<{ announced: number; nextEnd: string | null }> {
    return (
      this.announcements?.announceEndedLeases(now) ??
      Promise.resolve({ announced: 0, nextEnd: null })
    );
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
