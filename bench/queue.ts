/**
 * Issue 11: what dispatch costs per job on PostgreSQL, pg-boss (PgBossDispatch) against the
 * store's leases (JobRepository), on a database of its own on the local server. Round trips are
 * counted at the client (every pg query, BEGIN and COMMIT included); CPU is this process's and
 * the database's (the backends serving this database, from /proc). The handler does nothing, so
 * all that is measured is the queue.
 *   npm run bench:queue               (1000 jobs)
 *   node --import tsx bench/queue.ts 5000
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { pino } from 'pino';
import { PgBossDispatch } from '../src/queue/pg-boss-dispatch.js';
import { openStore } from '../src/store/open-store.js';
import type { Store } from '../src/store/store.js';
import { freshPostgresDatabase } from '../test/helpers/test-database.js';

const JOBS = Number(process.argv[2] ?? 1000);
const ACCOUNTS = 10;
const QUEUE = 'assay.scan';

let roundTrips = 0;
// Every query of every pool (the store's and pg-boss's share this module) goes through here.
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  roundTrips++;
  return Reflect.apply(query, this, args);
} as typeof query;

/** CPU seconds the database's backends have used (clock ticks of 10 ms). */
async function databaseCpu(store: Store): Promise<Map<number, number>> {
  const { rows } = await store.db.executeQuery<{ pid: number }>({
    sql: 'SELECT pid FROM pg_stat_activity WHERE datname = current_database()',
    parameters: [],
    query: { kind: 'RawNode' } as never,
    queryId: { queryId: 'bench' },
  });
  const cpu = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      // Ended since.
    }
  }
  return cpu;
}

async function measure(store: Store, what: string, run: () => Promise<void>): Promise<void> {
  const serverBefore = await databaseCpu(store);
  const tripsBefore = roundTrips;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await run();
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  const trips = roundTrips - tripsBefore;
  const serverAfter = await databaseCpu(store);
  let server = 0;
  for (const [pid, seconds] of serverAfter) server += seconds - (serverBefore.get(pid) ?? 0);
  const perJob = (value: number) => (value / JOBS).toFixed(2);
  console.log(
    `${what.padEnd(44)} ${perJob(trips).padStart(6)} round trips  ` +
      `${perJob((cpu.user + cpu.system) / 1000).padStart(5)} ms CPU (node)  ` +
      `${perJob(server * 1000).padStart(5)} ms CPU (postgres)  ` +
      `${(JOBS / (ms / 1000)).toFixed(0).padStart(5)} jobs/s`,
  );
}

async function main(): Promise<void> {
  const url = await freshPostgresDatabase();
  const store = await openStore({ dataDir: '', databaseUrl: url, databasePoolSize: 4 });
  const dispatch = new PgBossDispatch({
    connectionString: url,
    logger: pino({ level: 'warn' }),
    pollSeconds: 0.5,
  });
  await dispatch.start();
  const now = new Date().toISOString();
  const accounts = Array.from({ length: ACCOUNTS }, (_, i) => `bench${String(i).padStart(3, '0')}`);
  for (const id of accounts) {
    await store.accounts.insert({
      id,
      name: id,
      billingEmail: '',
      subscription: '',
      balance: 0,
      startingBalance: 0,
      enforceBalance: false,
      creationDate: now,
      modificationDate: now,
      callbackSecret: '',
      active: true,
    });
  }
  const job = (id: string, i: number) => ({
    id,
    accountId: accounts[i % ACCOUNTS] ?? '',
    apiKeyId: 'bench',
    apiVersion: 'v2.2',
    kind: 'upload' as const,
    state: 'pending' as const,
    location: null,
    spoolKey: null,
    metadata: {},
    callback: null,
    attempts: 0,
    runAfter: now,
    creationDate: now,
  });
  console.log(`${JOBS} jobs, ${ACCOUNTS} accounts, PostgreSQL at ${new URL(url).host}`);

  await measure(store, 'commit a job row (no queue)', async () => {
    for (let i = 0; i < JOBS; i++) {
      await store.transaction((trx) => trx.jobs.insert(job(`l${i}`, i)));
    }
  });
  await measure(store, 'commit a job row + pg-boss send', async () => {
    for (let i = 0; i < JOBS; i++) {
      await store.transaction(async (trx) => {
        await trx.jobs.insert(job(`q${i}`, i));
        await dispatch.enqueue(trx.db, QUEUE, `q${i}`, { group: accounts[i % ACCOUNTS] ?? '' });
      });
    }
  });

  await measure(store, 'pg-boss fetch+complete (4 slots, perGroup 4)', async () => {
    let done = 0;
    let finished = () => {};
    const all = new Promise<void>((resolve) => {
      finished = resolve;
    });
    await dispatch.work(QUEUE, { slots: 4, perGroup: 4 }, async () => {
      if (++done === JOBS) finished();
    });
    await all;
  });
  await dispatch.stop(1000);

  await measure(store, 'store lease: next due + claim + delete (x4)', async () => {
    let claimed = 0;
    const loop = async (start: string) => {
      let after = start;
      while (claimed < JOBS) {
        const at = new Date().toISOString();
        const next = await store.jobs.nextDueAfter('scan', after, at);
        if (next === null) {
          after = '';
          continue;
        }
        after = next.accountId;
        const lease = new Date(Date.now() + 60_000).toISOString();
        if ((await store.jobs.claim(next.id, at, lease)) === null) continue;
        claimed++;
        await store.jobs.delete(next.id);
      }
    };
    await Promise.all(['', accounts[2] ?? '', accounts[5] ?? '', accounts[7] ?? ''].map(loop));
  });
  await store.close();
}

await main();
