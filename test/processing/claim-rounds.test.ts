import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import type { Job } from '../../src/domain/records.js';
import { FairClaims } from '../../src/processing/fair-claims.js';
import { openStore } from '../../src/store/open-store.js';
import { addAccount, openTestStore, pendingUpload } from '../helpers/store-fixture.js';
import { onPostgres, prepareStore } from '../helpers/test-database.js';

const LIMITS = { scan: { slots: 8, perAccount: 3 }, download: { slots: 8, perAccount: 3 } };

// On SQLite a round holds the write lock from its start (BEGIN IMMEDIATE) across processes; two
// connections of one process would wait for each other on its one thread.
test('claim rounds of several processes at once never take an account past its cap', {
  skip: onPostgres ? false : 'PostgreSQL: its claim lock (SQLite: the write lock)',
}, async (t) => {
  const { store, dataDir } = await openTestStore(t);
  // A second connection pool on the same database: another process's.
  const other = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
  );
  t.after(() => other.close());
  await addAccount(store, 'account-a');
  for (let i = 0; i < 40; i++) {
    const job = pendingUpload('account-a', 10_000 - i);
    assert.ok(await store.jobs.accept(job, { timestamp: job.creationDate, message: 'received' }));
  }
  // Eight runners, four on each pool, each with 8 free slots, all looking at once; from the
  // second attempt on, each has served the account before (its round starts with a seek past it).
  const runners = [store, other].flatMap((pool) =>
    Array.from({ length: 4 }, () => new FairClaims(pool, LIMITS, 60_000)),
  );
  for (let attempt = 0; attempt < 5; attempt++) {
    const claimed: Job[] = [];
    await Promise.all(
      runners.map((claims) => claims.claim('scan', 8, new Map(), (job) => claimed.push(job))),
    );
    assert.equal(claimed.length, 3, `attempt ${attempt}: claimed ${claimed.length}, the cap is 3`);
    assert.equal(new Set(claimed.map((job) => job.id)).size, 3, 'each job once');
    // The next attempt starts from none in flight.
    for (const job of claimed) assert.ok(await store.jobs.delete(job.id));
  }
});
