import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { newId } from '../../src/accounts/credentials.js';
import type { EarlierVerdict } from '../../src/domain/records.js';
import { EngineVersions, VerdictCache } from '../../src/processing/verdict-cache.js';
import { capturedLogger } from '../helpers/logs.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';

const ACCOUNT = 'account-a';

test('a key begins with the content’s SHA-256; verdicts found with the claim answer without the store when they are all there are', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, ACCOUNT);
  const cache = new VerdictCache(
    store,
    new EngineVersions('assay 1', [async () => 'ClamAV 1.0/1/today'], 1_000),
    { mode: 'account', ttlMs: 3_600_000 },
    capturedLogger().logger,
  );
  const sha256 = createHash('sha256').update('content').digest('hex');
  const key = await cache.keyOf(ACCOUNT, ['MALWARE'], sha256);
  assert.ok(key?.startsWith(sha256) && key.length === 128, String(key));
  assert.notEqual(await cache.keyOf('account-b', ['MALWARE'], sha256), key, 'the account is in it');
  const other = await cache.keyOf(ACCOUNT, ['MALWARE', 'NSFW_IMAGE'], sha256);
  assert.notEqual(other, key, 'so are the categories');

  const now = new Date().toISOString();
  const fileId = newId();
  await store.files.insert(
    {
      id: fileId,
      accountId: ACCOUNT,
      apiKeyId: `key-${ACCOUNT}`,
      checksum: 'c'.repeat(40),
      sha256,
      contentLength: 7,
      contentType: 'text/plain',
      findings: ['In.The.Store'],
      metadata: {},
      callback: null,
      error: null,
      creationDate: now,
    },
    key,
  );
  const claimed = (findings: string, at: string, under = key): EarlierVerdict => ({
    key: under as string,
    fileId: newId(),
    receivedAt: at,
    contentType: 'text/plain',
    findings: [findings],
  });
  const older = new Date(Date.now() - 1000).toISOString();
  const verdicts = [
    claimed('Older', older),
    claimed('Newest', now),
    claimed('Other.Categories', now, other),
  ];
  assert.deepEqual(
    (await cache.find(key as string, { complete: true, verdicts }))?.findings,
    ['Newest'],
    'the newest under the key, of those the claim brought',
  );
  assert.equal(
    await cache.find(key as string, { complete: true, verdicts: verdicts.slice(2) }),
    null,
    'none under the key: a miss, the store not asked (it has one)',
  );
  assert.deepEqual(
    (await cache.find(key as string, { complete: false, verdicts: verdicts.slice(2) }))?.findings,
    ['In.The.Store'],
    'more than the claim brought: the store is asked',
  );
  assert.deepEqual((await cache.find(key as string))?.findings, ['In.The.Store']);
});
