import assert from 'node:assert/strict';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { tempDir } from '../helpers/service.js';
import { addAccount, pendingUpload } from '../helpers/store-fixture.js';

const MiB = 1024 * 1024;

// SQLite only: PostgreSQL checkpoints itself.
test("SQLite's WAL is copied into the database by the checkpointing thread, not left to grow", async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const errors: string[] = [];
  const store = await openStore(loadConfig({ ASSAY_DATA_DIR: dataDir }), undefined, (message) =>
    errors.push(message),
  );
  const database = join(dataDir, 'assay.db');
  const before = statSync(database).size;
  await addAccount(store, 'account');
  // 8 MiB of job content, a commit each: about 4,300 pages of WAL, below the connection's own
  // checkpoint (10,000), so only the thread can have put it into the database file.
  for (let i = 0; i < 256; i++) {
    await store.jobs.insert(pendingUpload('account', 0, 32 * 1024));
  }
  let size = statSync(database).size;
  for (const deadline = Date.now() + 5000; size - before < 8 * MiB && Date.now() < deadline; ) {
    await sleep(50);
    size = statSync(database).size;
  }
  assert.ok(
    size - before >= 8 * MiB,
    `the database file grew by ${((size - before) / MiB).toFixed(1)} MiB`,
  );
  // Closing stops the thread (else the test's process would not end) and keeps every row.
  await store.close();
  const reopened = await openStore(loadConfig({ ASSAY_DATA_DIR: dataDir }));
  t.after(() => reopened.close());
  const { total } = await reopened.jobs.spooledBytes('account');
  assert.equal(total, 256 * 32 * 1024);
  assert.deepEqual(errors, []);
});
