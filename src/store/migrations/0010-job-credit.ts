import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // 1: the job's credit was taken from the balance when it was accepted (given back if it ends in
  // an error). Jobs accepted before this migration have 0 and are charged when they finish.
  await db.schema
    .alterTable('jobs')
    .addColumn('credit_held', 'integer', (column) => column.notNull().defaultTo(0))
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('jobs').dropColumn('credit_held').execute();
}
