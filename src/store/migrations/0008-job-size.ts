import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // Bytes the job holds in the spool (0 for a fetch): their sum, in all and per account, is the
  // spool quota's count of committed work, the same for every process sharing the store.
  await db.schema
    .alterTable('jobs')
    .addColumn('size', 'bigint', (column) => column.notNull().defaultTo(0))
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('size').execute();
}
