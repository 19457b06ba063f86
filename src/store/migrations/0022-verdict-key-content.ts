import { type Kysely, PostgresAdapter, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * A verdict's key begins with its content's SHA-256 (VerdictCache.keyOf: 64 hexadecimal digits of
 * the content's hash, then 64 of the rest), so a claim finds the verdicts of its jobs' content by
 * a range of the existing index, in its own statement (issue 28). Keys written before are never
 * found again: their content is scanned once more, as after a signature update. Widening a
 * varchar is a catalog change on PostgreSQL (no rewrite); SQLite does not check lengths.
 */
export async function up(db: AnyDb): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`ALTER TABLE files ALTER COLUMN verdict_key TYPE varchar(128)`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  await sql`UPDATE files SET verdict_key = NULL WHERE length(verdict_key) > 64`.execute(db);
  await sql`ALTER TABLE files ALTER COLUMN verdict_key TYPE varchar(64)`.execute(db);
}
