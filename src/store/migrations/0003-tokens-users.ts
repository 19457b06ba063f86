import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // Temporary credentials: Basic with the id and an empty password, until they expire.
  await db.schema
    .createTable('tokens')
    .addColumn('id', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('api_key_id', 'varchar(64)', (c) => c.notNull())
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .addColumn('expiration_date', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('tokens_account').on('tokens').column('account_id').execute();

  await db.schema
    .createTable('users')
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('creation_date', 'text', (c) => c.notNull())
    .addColumn('last_login_date', 'text')
    .addPrimaryKeyConstraint('users_pk', ['account_id', 'email'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('users').execute();
  await db.schema.dropTable('tokens').execute();
}
