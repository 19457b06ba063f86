import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

export async function up(db: AnyDb): Promise<void> {
  // A key's own token bucket; both null means the service's ASSAY_RATE_LIMIT/ASSAY_RATE_BURST.
  await db.schema.alterTable('api_keys').addColumn('rate_limit', 'real').execute();
  await db.schema.alterTable('api_keys').addColumn('rate_burst', 'integer').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('rate_burst').execute();
  await db.schema.alterTable('api_keys').dropColumn('rate_limit').execute();
}
