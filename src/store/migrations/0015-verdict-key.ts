import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * The verdict cache is an index over results: a result scanned with a complete verdict carries the
 * key it may answer later items under (content, categories, engine and signature versions, scope);
 * results that reused a verdict, errors and partial verdicts carry none. The index is partial, so
 * results without a key cost it nothing.
 *
 * `engine_versions` holds the versions Assay itself sets, part of every key like clamd's VERSION:
 * a new value (`assay admin verdict-cache clear`) retires every verdict stored so far, in every
 * process sharing the store.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('engine_versions')
    .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('version', 'varchar(64)', (c) => c.notNull())
    .addColumn('modification_date', 'text', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('files').addColumn('verdict_key', 'varchar(64)').execute();
  await db.schema
    .createIndex('files_verdict_key')
    .on('files')
    .columns(['verdict_key', 'creation_date'])
    .where('verdict_key', 'is not', null)
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('engine_versions').execute();
  await db.schema.dropIndex('files_verdict_key').execute();
  await db.schema.alterTable('files').dropColumn('verdict_key').execute();
}
