import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { isStoreUnavailable } from '../../src/domain/failures.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

/** A second connection that ends a backend, as `pg_terminate_backend` or a server restart would. */
async function terminator(url: string) {
  const admin = new pg.Client(url);
  await admin.connect();
  return {
    async terminate(pid: number) {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    },
    close: () => admin.end(),
  };
}

async function backendPid(store: Store): Promise<number> {
  const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(store.db);
  return Number(rows[0]?.pid);
}

// A connection that drops while a transaction holds it used to emit an unheard 'error' on the pg
// client, which ended the process (issue 25): these tests would not finish then.
describe('a connection dropped inside a transaction', {
  skip: onPostgres ? false : 'PostgreSQL connections only (npm run test:postgres)',
}, () => {
  for (const when of ['while a statement runs', 'between two statements'] as const) {
    test(`${when}: fails that transaction as an outage, and the store goes on`, async (t) => {
      const url = await freshPostgresDatabase();
      const lost: Error[] = [];
      const store = await openStore(
        { dataDir: '', databaseUrl: url, databasePoolSize: 2 },
        (error) => lost.push(error),
      );
      t.after(() => store.close());
      const admin = await terminator(url);
      t.after(() => admin.close());

      const outcome = await store
        .transaction(async (trx) => {
          const pid = await backendPid(trx);
          if (when === 'while a statement runs') {
            const running = sql`SELECT pg_sleep(5)`.execute(trx.db);
            // It may fail before the termination's own answer comes back: not an unhandled rejection
            // (which failed the test once under a full suite's load); awaited below all the same.
            running.catch(() => {});
            await sleep(100);
            await admin.terminate(pid);
            await running;
          } else {
            await admin.terminate(pid);
            await sleep(200); // the server's goodbye and the socket's end arrive meanwhile
            await sql`SELECT 1`.execute(trx.db);
          }
          return 'committed';
        })
        .catch((error: unknown) => error);
      assert.ok(outcome instanceof Error, 'the transaction failed');
      assert.ok(isStoreUnavailable(outcome), `an outage (503, a job waits): ${String(outcome)}`);

      // The dropped client left the pool: the next transactions get live connections.
      for (let round = 0; round < 3; round++) {
        const value = await store.transaction(async (trx) => {
          const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(trx.db);
          return rows[0]?.one;
        });
        assert.equal(value, 1);
      }
      assert.deepEqual(lost, [], 'a checked-out client is not reported as an idle one');
    });
  }

  test('an idle connection that drops is reported, not fatal', async (t) => {
    const url = await freshPostgresDatabase();
    const lost: Error[] = [];
    const store = await openStore({ dataDir: '', databaseUrl: url, databasePoolSize: 1 }, (error) =>
      lost.push(error),
    );
    t.after(() => store.close());
    const admin = await terminator(url);
    t.after(() => admin.close());
    await admin.terminate(await backendPid(store));
    await sleep(200);
    assert.equal(lost.length, 1, 'reported once');
    await store.ping();
  });
});
