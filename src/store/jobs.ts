import type { Kysely, Selectable } from 'kysely';
import type { Job, JobKind, LegacyJobOptions } from './records.js';
import type { Database, JobsTable } from './schema.js';

function toJob(row: Selectable<JobsTable>): Job {
  return {
    id: row.id,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    apiVersion: row.api_version,
    kind: row.kind as JobKind,
    state: row.state as Job['state'],
    location: row.location,
    spoolPath: row.spool_path,
    metadata: JSON.parse(row.metadata) as Record<string, string>,
    callback: row.callback,
    attempts: row.attempts,
    runAfter: row.run_after,
    creationDate: row.creation_date,
    legacy: row.legacy === null ? null : (JSON.parse(row.legacy) as LegacyJobOptions),
  };
}

export class JobRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(job: Job): Promise<void> {
    await this.db
      .insertInto('jobs')
      .values({
        id: job.id,
        account_id: job.accountId,
        api_key_id: job.apiKeyId,
        api_version: job.apiVersion,
        kind: job.kind,
        state: job.state,
        location: job.location,
        spool_path: job.spoolPath,
        metadata: JSON.stringify(job.metadata),
        callback: job.callback,
        attempts: job.attempts,
        run_after: job.runAfter,
        creation_date: job.creationDate,
        legacy: job.legacy ? JSON.stringify(job.legacy) : null,
      })
      .execute();
  }

  async findForAccount(accountId: string, id: string): Promise<Job | null> {
    const row = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return row ? toJob(row) : null;
  }

  /** Ids of pending jobs due by `now`, oldest first. */
  async due(now: string, limit: number): Promise<string[]> {
    const rows = await this.db
      .selectFrom('jobs')
      .select('id')
      .where('state', '=', 'pending')
      .where('run_after', '<=', now)
      .orderBy('run_after')
      .limit(limit)
      .execute();
    return rows.map((row) => row.id);
  }

  /** The earliest moment a pending job becomes due, if any. */
  async nextDue(): Promise<string | null> {
    const row = await this.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.min('run_after').as('next'))
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return row?.next ?? null;
  }

  /** Takes a pending job for processing; null when another worker took it first. */
  async claim(id: string): Promise<Job | null> {
    const result = await this.db
      .updateTable('jobs')
      .set((eb) => ({ state: 'processing', attempts: eb('attempts', '+', 1) }))
      .where('id', '=', id)
      .where('state', '=', 'pending')
      .executeTakeFirst();
    if (result.numUpdatedRows === 0n) return null;
    const row = await this.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toJob(row) : null;
  }

  /** Puts a job back to wait until `runAfter` (the engine was down, or shutdown parked it). */
  async release(id: string, runAfter: string): Promise<void> {
    await this.db
      .updateTable('jobs')
      .set({ state: 'pending', run_after: runAfter })
      .where('id', '=', id)
      .execute();
  }

  /** At start: what a previous process was processing when it died is pending again. */
  async resetProcessing(): Promise<number> {
    const result = await this.db
      .updateTable('jobs')
      .set({ state: 'pending' })
      .where('state', '=', 'processing')
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  }

  /** False when there was no such job. */
  async delete(id: string): Promise<boolean> {
    const result = await this.db.deleteFrom('jobs').where('id', '=', id).executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
