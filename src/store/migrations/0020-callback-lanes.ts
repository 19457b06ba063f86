import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * Callback limits shared by every process delivering from one store: each delivery in flight
 * holds a row of `callback_admissions` until it ends or its lease does (a process that dies
 * mid-attempt frees its share when the delivery is due again), and each account's lane (its
 * deliveries to one destination) keeps its circuit in `callback_lanes`. An account's row with
 * destination '*' is the lock its admissions take, one at a time.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('callback_lanes')
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('opens', 'integer', (c) => c.notNull().defaultTo(0))
    /** Milliseconds since the epoch. */
    .addColumn('open_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_used', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('callback_lanes_pk', ['account_id', 'destination'])
    .execute();
  await db.schema
    .createTable('callback_admissions')
    .addColumn('delivery_id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    /** Milliseconds since the epoch: the delivery's lease. */
    .addColumn('lease_until', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('callback_admissions_lane')
    .on('callback_admissions')
    .columns(['account_id', 'destination'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('callback_admissions').execute();
  await db.schema.dropTable('callback_lanes').execute();
}
