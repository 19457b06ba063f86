import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Database } from '../../src/store/schema.js';

export interface WriteFailure {
  table: keyof Database;
  on: 'INSERT' | 'UPDATE' | 'DELETE';
  /** Only updates of these columns (UPDATE OF …). */
  columns?: readonly string[];
  /** An SQL condition on NEW/OLD; the write fails only when it holds. */
  when?: string;
  /** The error's message; by default "injected write failure". */
  message?: string;
}

/**
 * Makes the real store refuse some writes, as a full disk or a broken database would: triggers
 * that abort them with "injected write failure", until `heal()` drops them. Works on a store the
 * service shares (another connection to its database): its statements see the triggers.
 */
function onPostgres(db: Kysely<Database>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/**
 * Deletes rows as something behind the service's back would (a bug, an operator's SQL), with
 * foreign keys unchecked: on SQLite for the connection, on PostgreSQL for one transaction.
 */
export async function deleteUnchecked(
  db: Kysely<Database>,
  table: keyof Database,
  id: string,
): Promise<void> {
  if (onPostgres(db)) {
    await db.transaction().execute(async (trx) => {
      await sql`SET LOCAL session_replication_role = replica`.execute(trx);
      await trx.deleteFrom(table).where(sql.ref('id'), '=', id).execute();
    });
    return;
  }
  await sql`pragma foreign_keys = OFF`.execute(db);
  await db.deleteFrom(table).where(sql.ref('id'), '=', id).execute();
}

export async function failWrites(
  db: Kysely<Database>,
  failures: readonly WriteFailure[],
): Promise<{ heal(): Promise<void> }> {
  const postgres = onPostgres(db);
  const dropped: string[] = [];
  for (const [index, failure] of failures.entries()) {
    const { table, on, when, columns } = failure;
    const message = (failure.message ?? 'injected write failure').replaceAll("'", "''");
    const name = `test_fail_${table}_${on.toLowerCase()}_${index}`;
    const event = columns === undefined ? on : `${on} OF ${columns.join(', ')}`;
    if (postgres) {
      dropped.push(`DROP TRIGGER IF EXISTS ${name} ON ${table}`, `DROP FUNCTION IF EXISTS ${name}`);
      await sql
        .raw(
          `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION '${message}'; END $$`,
        )
        .execute(db);
      await sql
        .raw(
          `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} FOR EACH ROW
           ${when ? `WHEN (${when})` : ''} EXECUTE FUNCTION ${name}()`,
        )
        .execute(db);
    } else {
      dropped.push(`DROP TRIGGER IF EXISTS ${name}`);
      await sql
        .raw(
          `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} ${when ? `WHEN ${when}` : ''}
           BEGIN SELECT RAISE(ABORT, '${message}'); END`,
        )
        .execute(db);
    }
  }
  return {
    async heal() {
      for (const statement of dropped) await sql.raw(statement).execute(db);
    },
  };
}
