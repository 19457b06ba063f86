import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * The console's operations page (issue 27). Every Assay process writes a heartbeat row every few
 * seconds (what it runs and which signatures its clamd has loaded), so an operator sees every node
 * from any node; rows not seen for a day are deleted. Times are milliseconds since the epoch.
 *
 * Its recent errors read results with an `error` and callbacks with a failed attempt, newest
 * first: partial indexes, so results and callbacks without an error cost them nothing. Accounts
 * are listed by name, a page at a time (keyset on name and id).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('node_heartbeats')
    .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('role', 'varchar(16)', (c) => c.notNull())
    .addColumn('version', 'text', (c) => c.notNull())
    // Null while the node's clamd does not answer.
    .addColumn('clamd_version', 'text')
    .addColumn('signatures_version', 'integer')
    .addColumn('signatures_date', 'text')
    .addColumn('own_signatures_version', 'text', (c) => c.notNull())
    .addColumn('databases_version', 'text')
    // Null for a node that runs no jobs (role api).
    .addColumn('running_jobs', 'integer')
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('node_heartbeats_last_seen')
    .on('node_heartbeats')
    .column('last_seen_at')
    .execute();
  await db.schema
    .createIndex('files_recent_errors')
    .on('files')
    .column('creation_date')
    .where(sql.ref('error'), 'is not', null)
    .execute();
  await db.schema
    .createIndex('callback_deliveries_recent_errors')
    .on('callback_deliveries')
    .column('creation_date')
    .where(sql.ref('last_error'), 'is not', null)
    .execute();
  await db.schema.createIndex('accounts_name').on('accounts').columns(['name', 'id']).execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('accounts_name').execute();
  await db.schema.dropIndex('callback_deliveries_recent_errors').execute();
  await db.schema.dropIndex('files_recent_errors').execute();
  await db.schema.dropTable('node_heartbeats').execute();
}
