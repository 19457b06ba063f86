import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // The key that signs this account's callbacks: it must be readable to sign, so it is stored as is.
  await db.schema
    .alterTable('accounts')
    .addColumn('callback_secret', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  for (const { id } of await db.selectFrom('accounts').select('id').execute()) {
    await db
      .updateTable('accounts')
      .set({ callback_secret: randomBytes(32).toString('hex') })
      .where('id', '=', id)
      .execute();
  }

  // Work accepted with a 202 and not finished yet; the row goes when the result is recorded.
  await db.schema
    .createTable('jobs')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('api_key_id', 'varchar(64)', (c) => c.notNull())
    .addColumn('api_version', 'varchar(8)', (c) => c.notNull())
    .addColumn('kind', 'varchar(16)', (c) => c.notNull())
    .addColumn('state', 'varchar(16)', (c) => c.notNull())
    .addColumn('location', 'text')
    .addColumn('spool_path', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('callback', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('run_after', 'text', (c) => c.notNull())
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('jobs_due').on('jobs').columns(['state', 'run_after']).execute();

  await db.schema
    .createTable('trace_events')
    .addColumn('file_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('timestamp', 'text', (c) => c.notNull())
    .addColumn('message', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('trace_events_pk', ['file_id', 'seq'])
    .execute();

  // The callback outbox: a delivery lives here until it succeeds or is given up.
  await db.schema
    .createTable('callback_deliveries')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('file_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('state', 'varchar(16)', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    .addColumn('last_error', 'text')
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .addColumn('finished_date', 'text')
    .execute();
  await db.schema
    .createIndex('callback_deliveries_due')
    .on('callback_deliveries')
    .columns(['state', 'next_attempt_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('callback_deliveries').execute();
  await db.schema.dropTable('trace_events').execute();
  await db.schema.dropTable('jobs').execute();
  await db.schema.alterTable('accounts').dropColumn('callback_secret').execute();
}
