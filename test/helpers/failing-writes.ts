import { type Kysely, PostgresAdapter, sql } from 'kysely';
import type { Database } from '../../src/store/schema.js';

export interface WriteFailure {
  table: keyof Database;
  on: 'INSERT' | 'UPDATE' | 'DELETE';
  /** An SQL condition on NEW/OLD; the write fails only when it holds. */
  when?: string;
}

/**
 * Makes the real store refuse some writes, as a full disk or a broken database would: triggers
 * that abort them with "injected write failure", until `heal()` drops them. Works on a store the
 * service shares (another connection to its database): its statements see the triggers.
 */
export async function failWrites(
  db: Kysely<Database>,
  failures: readonly WriteFailure[],
): Promise<{ heal(): Promise<void> }> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  if (postgres) {
    await sql
      .raw(
        `CREATE OR REPLACE FUNCTION test_fail_write() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'injected write failure'; END $$`,
      )
      .execute(db);
  }
  const dropped: string[] = [];
  for (const [index, { table, on, when }] of failures.entries()) {
    const name = `test_fail_${table}_${on.toLowerCase()}_${index}`;
    if (postgres) {
      dropped.push(`DROP TRIGGER IF EXISTS ${name} ON ${table}`);
      await sql
        .raw(
          `CREATE TRIGGER ${name} BEFORE ${on} ON ${table} FOR EACH ROW
           ${when ? `WHEN (${when})` : ''} EXECUTE FUNCTION test_fail_write()`,
        )
        .execute(db);
    } else {
      dropped.push(`DROP TRIGGER IF EXISTS ${name}`);
      await sql
        .raw(
          `CREATE TRIGGER ${name} BEFORE ${on} ON ${table} ${when ? `WHEN ${when}` : ''}
           BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`,
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
