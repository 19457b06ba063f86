import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * A small async upload is kept in its job's row (ASSAY_ASYNC_INLINE_BYTES) instead of a spool
 * file: its content is durable with the job's commit, and uploads accepted together share that
 * commit's sync, with no file to write, sync, rename, read and remove. `bytea` is PostgreSQL's
 * binary type; SQLite stores a blob as it is under any declared type.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').addColumn('content', 'bytea').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('content').execute();
}
