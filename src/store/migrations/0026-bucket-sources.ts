import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Bucket scanning (issue 42). `bucket_sources`: a watched bucket and prefix, how to reach it (the
 * credentials' name, never a secret; the webhook's token as a SHA-256 hash), the key its objects
 * are scanned as, what a threat does, and its listing's checkpoint and lease (milliseconds since
 * the epoch). `bucket_objects`: one row per object seen, its scan in flight (`job_id`), its latest
 * verdict (the result, the status written back, the signature set that gave it, for rescans)
 * and the write-back still due (`write_due`, milliseconds since the epoch; null: none).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('bucket_sources')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('name', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('api_key_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('endpoint', 'text', (c) => c.notNull())
    .addColumn('region', 'varchar(64)', (c) => c.notNull())
    .addColumn('bucket', 'varchar(64)', (c) => c.notNull())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('credentials', 'varchar(128)', (c) => c.notNull())
    .addColumn('queue_url', 'text')
    .addColumn('webhook_token_hash', 'varchar(64)')
    .addColumn('on_threat', 'varchar(16)', (c) => c.notNull())
    .addColumn('quarantine', 'text')
    .addColumn('callback', 'text')
    .addColumn('rescan_window', 'bigint')
    .addColumn('listing', 'varchar(16)', (c) => c.notNull().defaultTo('idle'))
    .addColumn('list_after', 'text')
    .addColumn('list_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('list_started', 'varchar(32)')
    .addColumn('list_finished', 'varchar(32)')
    .addColumn('list_lease_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('creation_date', 'varchar(32)', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('bucket_objects')
    .addColumn('source_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('object_key', 'text', (c) => c.notNull())
    .addColumn('etag', 'varchar(256)')
    .addColumn('version_id', 'text')
    .addColumn('size', 'bigint')
    .addColumn('job_id', 'varchar(36)')
    .addColumn('result_id', 'varchar(36)')
    .addColumn('status', 'varchar(32)')
    .addColumn('signatures', 'text')
    .addColumn('scanned_at', 'varchar(32)')
    .addColumn('write_due', 'bigint')
    .addColumn('write_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('announced_at', 'varchar(32)', (c) => c.notNull())
    .addPrimaryKeyConstraint('bucket_objects_pk', ['source_id', 'object_key'])
    .execute();
  await db.schema.createIndex('bucket_objects_job').on('bucket_objects').column('job_id').execute();
  await db.schema
    .createIndex('bucket_objects_write')
    .on('bucket_objects')
    .column('write_due')
    .execute();
  await db.schema
    .createIndex('bucket_objects_verdict')
    .on('bucket_objects')
    .columns(['source_id', 'status', 'scanned_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('bucket_objects').execute();
  await db.schema.dropTable('bucket_sources').execute();
}
