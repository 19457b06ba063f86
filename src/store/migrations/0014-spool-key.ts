import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Jobs name their content by a key in the spool (the job's id), not by a path on this machine:
 * any process with the same spool (a shared directory, an S3 bucket) can read it.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').renameColumn('spool_path', 'spool_key').execute();
  const rows = await db
    .selectFrom('jobs')
    .select(['id', 'spool_key'])
    .where('spool_key', 'is not', null)
    .execute();
  for (const row of rows as Array<{ id: string; spool_key: string }>) {
    // `<data dir>/spool/<id>`: the key is the file's name.
    const key = row.spool_key.slice(row.spool_key.lastIndexOf('/') + 1);
    if (key !== row.spool_key) {
      await db.updateTable('jobs').set({ spool_key: key }).where('id', '=', row.id).execute();
    }
  }
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').renameColumn('spool_key', 'spool_path').execute();
}
