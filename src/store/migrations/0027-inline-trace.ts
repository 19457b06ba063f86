import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/**
 * A synchronous result's trace, written with its row (a JSON array of [timestamp, message]
 * pairs) instead of as rows of `trace_events`: one row per item instead of one plus one per event
 * and as many index entries (issue 43: a large share of what recording an item cost on SQLite). Events added later (callback deliveries) and a job's events stay rows; the trace is the
 * inline events, then the rows. Null for results recorded before, and for jobs' results.
 */
export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('files').addColumn('trace', 'text').execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.alterTable('files').dropColumn('trace').execute();
}
