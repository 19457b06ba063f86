import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * A small upload's content moves out of its job's row into `job_contents`, removed with the job
 * (on delete cascade). In the row, 4 KB of content made each job fill a page of SQLite's table:
 * every claim rewrote it, and every count and sum over the jobs (the spool quota, the caps) read a
 * page per job. PostgreSQL already kept such values out of line (TOAST); its table is the same.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('job_contents')
    .addColumn('job_id', 'varchar(32)', (c) =>
      c.primaryKey().references('jobs.id').onDelete('cascade'),
    )
    .addColumn('content', 'bytea', (c) => c.notNull())
    .execute();
  await sql`INSERT INTO job_contents (job_id, content)
    SELECT id, content FROM jobs WHERE content IS NOT NULL`.execute(db);
  await db.schema.alterTable('jobs').dropColumn('content').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('content', 'bytea').execute();
  await sql`UPDATE jobs SET content =
    (SELECT content FROM job_contents WHERE job_contents.job_id = jobs.id)`.execute(db);
  await db.schema.dropTable('job_contents').execute();
}
