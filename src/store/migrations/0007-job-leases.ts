import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // Why the job's last counted attempt failed; cleared when an attempt starts, so an attempt that
  // ended the process leaves it empty.
  await db.schema.alterTable('jobs').addColumn('last_error', 'text').execute();
  // `run_after` is when a job may be claimed: a pending job's due time, or the end of a processing
  // job's lease. Claims look for the oldest due job, in all and per account (fair claiming).
  await db.schema.createIndex('jobs_run_after').on('jobs').column('run_after').execute();
  await db.schema
    .createIndex('jobs_account_run_after')
    .on('jobs')
    .columns(['account_id', 'run_after'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('jobs_account_run_after').execute();
  await db.schema.dropIndex('jobs_run_after').execute();
  await db.schema.alterTable('jobs').dropColumn('last_error').execute();
}
