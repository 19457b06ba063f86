import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Results are kept for a retention time (issue 41): the key's own (`result_retention`, seconds;
 * null: the service's default for it), deleted in batches by key and age. The indexes find a
 * key's oldest results, and an expired result's callback deliveries, without a scan.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('result_retention', 'bigint').execute();
  await db.schema
    .createIndex('files_key_created')
    .on('files')
    .columns(['api_key_id', 'creation_date'])
    .execute();
  await db.schema
    .createIndex('callback_deliveries_file')
    .on('callback_deliveries')
    .column('file_id')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('callback_deliveries_file').execute();
  await db.schema.dropIndex('files_key_created').execute();
  await db.schema.alterTable('api_keys').dropColumn('result_retention').execute();
}
