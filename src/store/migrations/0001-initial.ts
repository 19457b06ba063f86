import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('billing_email', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('subscription', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('balance', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('starting_balance', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('enforce_balance', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .addColumn('modification_date', 'text', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('secret_hash', 'varchar(64)', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('detection_categories', 'text', (c) => c.notNull())
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .addColumn('last_seen_date', 'text')
    .execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').column('account_id').execute();

  await db.schema
    .createTable('files')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('api_key_id', 'varchar(64)', (c) => c.notNull())
    .addColumn('checksum', 'varchar(40)')
    .addColumn('sha256', 'varchar(64)')
    .addColumn('content_length', 'bigint')
    .addColumn('content_type', 'text')
    .addColumn('findings', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('callback', 'text')
    .addColumn('error', 'text')
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('files_account')
    .on('files')
    .columns(['account_id', 'creation_date'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('files').execute();
  await db.schema.dropTable('api_keys').execute();
  await db.schema.dropTable('accounts').execute();
}
