import { type Kysely, PostgresAdapter } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Trace events were numbered per file with `max(seq) + 1`, read then written: two writers (the
 * job runner and the callback dispatcher, in two processes on PostgreSQL) could take the same
 * number. Now `seq` is the database's own sequence, in the order rows are written: one insert,
 * no read, no collision. Per-file order is kept by copying the old rows in their order.
 */
export async function up(db: AnyDb): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('trace_events_ordered')
    .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) => c.primaryKey())
    .addColumn('file_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('timestamp', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .execute();
  await db
    .insertInto('trace_events_ordered')
    .columns(['file_id', 'timestamp', 'message'])
    .expression(
      db
        .selectFrom('trace_events')
        .select(['file_id', 'timestamp', 'message'])
        .orderBy('file_id')
        .orderBy('seq'),
    )
    .execute();
  await db.schema.dropTable('trace_events').execute();
  await db.schema.alterTable('trace_events_ordered').renameTo('trace_events').execute();
  await db.schema
    .createIndex('trace_events_file')
    .on('trace_events')
    .columns(['file_id', 'seq'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('0012-trace-order cannot be undone: the per-file numbering is gone');
}
