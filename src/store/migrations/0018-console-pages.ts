import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * The console's files and callbacks pages read an account's rows a page at a time, newest first,
 * from a (creation_date, id) cursor: one index range each, no sort.
 *
 * - files: (account_id, creation_date) becomes (account_id, creation_date, id), so rows received
 *   in the same millisecond come in id order from the index too. It replaces the old one (same
 *   prefix, so the overview's counts per day still use it): no extra write per result.
 * - callback_deliveries had no index by account: (account_id, state, creation_date, id) gives
 *   each state (failed, pending, delivered) its own range.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createIndex('files_account_created')
    .on('files')
    .columns(['account_id', 'creation_date', 'id'])
    .execute();
  await db.schema.dropIndex('files_account').execute();
  await db.schema
    .createIndex('callback_deliveries_account')
    .on('callback_deliveries')
    .columns(['account_id', 'state', 'creation_date', 'id'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('callback_deliveries_account').execute();
  await db.schema
    .createIndex('files_account')
    .on('files')
    .columns(['account_id', 'creation_date'])
    .execute();
  await db.schema.dropIndex('files_account_created').execute();
}
