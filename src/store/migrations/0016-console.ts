import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * The web console (issue 27): a user signs in with an e-mail address unique among users who have
 * a password (a slow hash: scrypt), and may be an operator. Sessions live in the store, so every
 * process and node behind a load balancer knows them: only the SHA-256 of the cookie's secret is
 * kept, with the user's account and an absolute and an idle end.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('users').addColumn('password_hash', 'text').execute();
  await db.schema
    .alterTable('users')
    .addColumn('operator', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('users_sign_in_email')
    .on('users')
    .column('email')
    .unique()
    .where(sql.ref('password_hash'), 'is not', null)
    .execute();
  await db.schema
    .createTable('console_sessions')
    .addColumn('id_hash', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('account_id', 'varchar(32)', (c) => c.notNull().references('accounts.id'))
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('creation_date', 'text', (c) => c.notNull())
    // Milliseconds since the epoch.
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('console_sessions_email')
    .on('console_sessions')
    .column('email')
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('console_sessions').execute();
  await db.schema.dropIndex('users_sign_in_email').execute();
  await db.schema.alterTable('users').dropColumn('operator').execute();
  await db.schema.alterTable('users').dropColumn('password_hash').execute();
}
