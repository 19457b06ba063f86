import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * The name a client gave its file (the multipart part's filename, or a fetched URL's last path
 * segment), shown by the console; never part of the API's result. At most 255 bytes of UTF-8
 * (FILE_NAME_BYTES), so at most 255 characters too; null when none was given. A job carries it to
 * its result.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('files').addColumn('file_name', 'varchar(255)').execute();
  await db.schema.alterTable('jobs').addColumn('file_name', 'varchar(255)').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('file_name').execute();
  await db.schema.alterTable('files').dropColumn('file_name').execute();
}
