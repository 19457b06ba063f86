import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // A job's stage: 'download' (a fetch whose content is not in the spool yet) or 'scan' (its
  // content is spooled). Each stage has slots and per-account caps of its own, so downloads
  // never hold scanning slots (issue 18). On pg-boss the stages become two queues.
  await db.schema
    .alterTable('jobs')
    .addColumn('stage', 'text', (column) => column.notNull().defaultTo('scan'))
    .execute();
  // Before stages, a fetch's download lived only in its attempt: every unfinished fetch starts
  // over with its download (no spool column named: a database may take this after 0014).
  await db.updateTable('jobs').set({ stage: 'download' }).where('kind', '=', 'fetch').execute();
  // Fair claims walk the accounts of one stage round-robin: one seek per account.
  await db.schema.dropIndex('jobs_account_run_after').execute();
  await db.schema
    .createIndex('jobs_stage_account_run_after')
    .on('jobs')
    .columns(['stage', 'account_id', 'run_after'])
    .execute();
  // Fetches downloaded and waiting for their scan count toward their account's download cap.
  await db.schema
    .createIndex('jobs_stage_kind_account')
    .on('jobs')
    .columns(['stage', 'kind', 'account_id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('jobs_stage_kind_account').execute();
  await db.schema.dropIndex('jobs_stage_account_run_after').execute();
  await db.schema
    .createIndex('jobs_account_run_after')
    .on('jobs')
    .columns(['account_id', 'run_after'])
    .execute();
  await db.schema.alterTable('jobs').dropColumn('stage').execute();
}
