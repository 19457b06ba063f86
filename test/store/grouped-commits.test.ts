import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { GroupedCommits } from '../../src/store/grouped-commits.js';
import { openStore } from '../../src/store/open-store.js';
import { tempDir } from '../helpers/service.js';
import { prepareStore } from '../helpers/test-database.js';

test('writes handed over together (one commit for many) are all kept, but one that fails fails alone', async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
  );
  t.after(() => store.close());
  const commits = new GroupedCommits(store);
  const names = Array.from({ length: 20 }, (_, i) => `account ${i}`);
  const outcomes = await Promise.allSettled(
    names.map((name, i) =>
      commits.run(async (trx) => {
        const id = `${i}`.padStart(32, '0');
        await trx.accounts.insert({
          id,
          name,
          billingEmail: '',
          subscription: '',
          balance: 0,
          startingBalance: 0,
          enforceBalance: false,
          creationDate: '2026-01-01T00:00:00Z',
          modificationDate: '2026-01-01T00:00:00Z',
          callbackSecret: 'secret',
          active: true,
        });
        // The write of account 7 fails after its insert: its insert must not stay either.
        if (i === 7) throw new Error('this write fails');
        return id;
      }),
    ),
  );
  const rejected = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [i] : []));
  assert.deepEqual(rejected, [7], 'only the failing write is refused');
  assert.equal((outcomes[3] as PromiseFulfilledResult<string>).value, '3'.padStart(32, '0'));
  const stored = (await store.accounts.list()).map((a) => a.name).sort();
  assert.deepEqual(stored, names.filter((_, i) => i !== 7).sort(), 'every other write committed');
});

test('durable: writes handed over together share one sync of their commit, and none resolves before it', async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
  );
  t.after(() => store.close());
  // Count the syncs and hold each until released: nothing may resolve while its sync is pending.
  let syncs = 0;
  let release: () => void = () => {};
  const sync = store.syncCommits.bind(store);
  store.syncCommits = async () => {
    syncs += 1;
    await new Promise<void>((resolve) => {
      release = resolve;
    });
    await sync();
  };
  const commits = new GroupedCommits(store, { durable: true });
  const resolved: number[] = [];
  const writes = Array.from({ length: 10 }, (_, i) =>
    commits
      .run(async (trx) => trx.accounts.find(`${i}`.padStart(32, '0')))
      .then(() => resolved.push(i)),
  );
  for (let i = 0; syncs === 0 && i < 1000; i++) await new Promise((r) => setTimeout(r, 2));
  assert.equal(syncs, 1, 'the group commit is synced');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(resolved, [], 'none resolves before the sync of its commit');
  release();
  await Promise.all(writes);
  assert.equal(syncs, 1, 'one sync for the ten writes');
  assert.equal(resolved.length, 10);
});
