import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/store/schema.js';

export interface WriteFailure {
  table: keyof Database;
  on: 'INSERT' | 'UPDATE' | 'DELETE';
  /** An SQL condition on NEW/OLD; the write fails only when it holds. */
  when?: string;
}

/**
 * Makes the real SQLite store refuse some writes, as a full disk or a broken database would:
 * triggers that abort them with "injected write failure", until `heal()` drops them. Works on a
 * store the service shares (another connection to its file): its statements see the triggers.
 */
export async function failWrites(
  db: Kysely<Database>,
  failures: readonly WriteFailure[],
): Promise<{ heal(): Promise<void> }> {
  const names: string[] = [];
  for (const [index, { table, on, when }] of failures.entries()) {
    const name = `test_fail_${table}_${on.toLowerCase()}_${index}`;
    names.push(name);
    await sql
      .raw(
        `CREATE TRIGGER ${name} BEFORE ${on} ON ${table} ${when ? `WHEN ${when}` : ''}
         BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`,
      )
      .execute(db);
  }
  return {
    async heal() {
      for (const name of names) await sql.raw(`DROP TRIGGER IF EXISTS ${name}`).execute(db);
    },
  };
}
