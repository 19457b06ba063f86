import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { newId } from '../../src/accounts/credentials.js';
import { loadConfig } from '../../src/config.js';
import type { Job } from '../../src/domain/records.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { tempDir } from './service.js';
import { prepareStore } from './test-database.js';

type After = { after: (fn: () => unknown) => void };

/**
 * A store of its own on a new data dir, closed and removed after the test: PostgreSQL when
 * ASSAY_TEST_STORE says so, unless `sqlite` (what only the SQLite deployment runs).
 */
export async function openTestStore(
  t: After,
  { sqlite = false }: { sqlite?: boolean } = {},
): Promise<{ store: Store; dataDir: string }> {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(sqlite ? {} : await prepareStore(dataDir)) }),
  );
  t.after(() => store.close());
  return { store, dataDir };
}

/** An account `id` (balance `balance`, not enforced unless said) with one key, `key-${id}`. */
export async function addAccount(
  store: Store,
  id: string,
  balance = 1000,
  { enforceBalance = false }: { enforceBalance?: boolean } = {},
): Promise<void> {
  const now = new Date().toISOString();
  await store.accounts.insert({
    id,
    name: id,
    billingEmail: '',
    subscription: '',
    balance,
    startingBalance: balance,
    enforceBalance,
    creationDate: now,
    modificationDate: now,
    callbackSecret: 'secret',
    active: true,
  });
  await store.apiKeys.insert({
    id: `key-${id}`,
    accountId: id,
    secretHash: 'x',
    active: true,
    tags: [],
    detectionCategories: [],
    creationDate: now,
    lastSeenDate: null,
    rateLimit: null,
    accountRateLimit: null,
  });
}

/** A pending v2.2 upload of `accountId`'s key, accepted `ageMs` ago, its content in the job. */
export function pendingUpload(accountId: string, ageMs = 0, size = 64): Job {
  const at = new Date(Date.now() - ageMs).toISOString();
  return {
    id: newId(),
    accountId,
    apiKeyId: `key-${accountId}`,
    apiVersion: 'v2.2',
    kind: 'upload',
    state: 'pending',
    location: null,
    spoolKey: null,
    content: randomBytes(size),
    metadata: {},
    callback: null,
    attempts: 0,
    runAfter: at,
    creationDate: at,
    size,
  };
}
