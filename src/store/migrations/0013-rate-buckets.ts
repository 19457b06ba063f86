import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Token buckets shared by every process on the store (rate limits of keys, failed
 * authentications of addresses): processes lease a few tokens at a time from these rows.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('rate_buckets')
    .addColumn('name', 'varchar(200)', (c) => c.primaryKey())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    /** Milliseconds since the epoch of the last lease. */
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addColumn('rate', 'double precision', (c) => c.notNull())
    .addColumn('burst', 'double precision', (c) => c.notNull())
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('rate_buckets').execute();
}
