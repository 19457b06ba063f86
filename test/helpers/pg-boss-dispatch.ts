import type { TestContext } from 'node:test';
import { PgBossDispatch, type PgBossDispatchOptions } from '../../src/queue/pg-boss-dispatch.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { capturedLogger } from './logs.js';
import { freshPostgresDatabase } from './test-database.js';

// The pg-boss adapter's own tests (test/queue/pg-boss-dispatch*.test.ts) work a queue of the
// service's (what the store sends on it does not matter).
export const QUEUE = 'assay.callback';
// The shortest heartbeat pg-boss takes, and a quick monitor, so a lost job comes back in seconds.
export const FAST = { heartbeatSeconds: 10, monitorSeconds: 2, pollSeconds: 0.5 } as const;

/** A fresh PostgreSQL database with the store's schema; the store is closed after the test. */
export async function database(t: TestContext): Promise<{ url: string; store: Store }> {
  const url = await freshPostgresDatabase();
  const store = await openStore({ dataDir: '', databaseUrl: url, databasePoolSize: 4 });
  t.after(() => store.close());
  return { url, store };
}

/** A started adapter with the FAST timings unless `options` say otherwise; stopped after the test. */
export async function dispatch(
  t: TestContext,
  options: Omit<PgBossDispatchOptions, 'logger'> & Partial<Pick<PgBossDispatchOptions, 'logger'>>,
): Promise<PgBossDispatch> {
  const instance = new PgBossDispatch({ ...FAST, logger: capturedLogger().logger, ...options });
  await instance.start();
  t.after(() => instance.stop(0));
  return instance;
}

/** Enqueues in a transaction of its own, committed. */
export function enqueue(
  store: Store,
  queue: PgBossDispatch,
  jobId: string,
  group: string,
  startAfter?: Date,
): Promise<boolean> {
  return store.transaction((trx) =>
    queue.enqueue(trx.db, QUEUE, jobId, {
      group,
      ...(startAfter === undefined ? {} : { startAfter }),
    }),
  );
}
