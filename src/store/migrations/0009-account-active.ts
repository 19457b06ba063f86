import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // A disabled account keeps its data; every key and token of it is refused (401).
  await db.schema
    .alterTable('accounts')
    .addColumn('active', 'integer', (column) => column.notNull().defaultTo(1))
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('accounts').dropColumn('active').execute();
}
