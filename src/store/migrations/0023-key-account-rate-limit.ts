import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * A key's rate limit as its account sets it in the console, apart from the operator's
 * (`rate_limit`, `rate_burst`: `admin key update`), which is its ceiling: the stricter of the two
 * applies, so the console can lower a limit and never raise it. Both null: none of the account's
 * own. A limit the console saved before this migration stays in `rate_limit`, a ceiling now
 * (the operator's `--default-rate-limit` lifts it).
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').addColumn('account_rate_limit', 'real').execute();
  await db.schema.alterTable('api_keys').addColumn('account_rate_burst', 'integer').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('api_keys').dropColumn('account_rate_burst').execute();
  await db.schema.alterTable('api_keys').dropColumn('account_rate_limit').execute();
}
