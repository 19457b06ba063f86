import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // v1.0 jobs: their legacy callbacks, result format and checksum, as JSON; null for v2.x jobs.
  await db.schema.alterTable('jobs').addColumn('legacy', 'text').execute();
  // A delivery is a POST of a result (v2.x, v1.0 post_callback) or a bare GET ping (v1.0 callback).
  await db.schema
    .alterTable('callback_deliveries')
    .addColumn('method', 'varchar(8)', (c) => c.notNull().defaultTo('POST'))
    .execute();
  await db.schema
    .alterTable('callback_deliveries')
    .addColumn('content_type', 'text', (c) => c.notNull().defaultTo('application/json'))
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('callback_deliveries').dropColumn('content_type').execute();
  await db.schema.alterTable('callback_deliveries').dropColumn('method').execute();
  await db.schema.alterTable('jobs').dropColumn('legacy').execute();
}
