import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { newId, newTokenId } from '../../src/accounts/credentials.js';
import { loadConfig } from '../../src/config.js';
import type { StoredFile, TraceEvent } from '../../src/domain/records.js';
import { openStore } from '../../src/store/open-store.js';
import { tempDir } from '../helpers/service.js';
import { storeEnv } from '../helpers/test-database.js';

const ACCOUNT = 'a'.repeat(32);

function fileOf(id: string, findings: string[] | null): StoredFile {
  return {
    id,
    accountId: ACCOUNT,
    apiKeyId: 'key',
    checksum: 'c'.repeat(40),
    sha256: 's'.repeat(64),
    contentLength: 4096,
    contentType: 'application/octet-stream',
    findings,
    metadata: { name: 'it’s "quoted"' },
    callback: null,
    error: findings === null ? 'scan failed' : null,
    creationDate: '2026-11-23T10:00:00.000Z',
  };
}

const eventsOf = (count: number): TraceEvent[] =>
  Array.from({ length: count }, (_, i) => ({
    timestamp: `2026-11-23T10:00:00.${String(i).padStart(3, '0')}Z`,
    message: `event ${i}`,
  }));

test('a result’s row, its whole trace in order and its charge are written together', async (t) => {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(loadConfig({ ASSAY_DATA_DIR: dataDir, ...storeEnv(dataDir) }));
  t.after(() => store.close());
  await store.accounts.insert({
    id: ACCOUNT,
    name: 'results',
    billingEmail: '',
    subscription: '',
    balance: 100,
    startingBalance: 100,
    enforceBalance: false,
    creationDate: '2026-01-01T00:00:00Z',
    modificationDate: '2026-01-01T00:00:00Z',
    callbackSecret: 'secret',
    active: true,
  });
  // 5 events (one statement on PostgreSQL), 20 (past the templates), none charged, and an error.
  const cases = [
    { id: '1'.repeat(32), findings: [], events: 5, credits: -1 },
    { id: '2'.repeat(32), findings: ['Win.Test.EICAR_HDB-1'], events: 20, credits: -1 },
    { id: '3'.repeat(32), findings: [], events: 3, credits: 0 },
    { id: '4'.repeat(32), findings: null, events: 1, credits: 1 },
  ];
  for (const { id, findings, events, credits } of cases) {
    await store.transaction((trx) =>
      trx.results.record({
        file: fileOf(id, findings),
        verdictKey: findings === null ? null : `key-${id}`,
        credits,
        events: eventsOf(events),
      }),
    );
  }
  for (const { id, findings, events } of cases) {
    assert.deepEqual(await store.files.findForAccount(ACCOUNT, id), fileOf(id, findings));
    assert.deepEqual(await store.trace.list(id), eventsOf(events), `the trace of ${id[0]}`);
  }
  assert.equal((await store.accounts.find(ACCOUNT))?.balance, 99, '100 - 1 - 1 + 0 + 1');
  const reused = await store.files.findVerdict(`key-${'2'.repeat(32)}`, '2026-01-01T00:00:00Z');
  assert.deepEqual(reused?.findings, ['Win.Test.EICAR_HDB-1'], 'stored under its verdict key');
});

test('ids are unique and in the order they were made; a token’s id takes nothing from the clock', async () => {
  const ids = Array.from({ length: 5000 }, () => newId());
  assert.equal(new Set(ids).size, ids.length);
  for (const id of ids) assert.match(id, /^[0-9a-f]{32}$/);
  // Made in this order: each id's time part is at least the one before (new rows go at the end).
  const times = ids.map((id) => id.slice(0, 12));
  assert.deepEqual([...times].sort(), times);
  const tokens = Array.from({ length: 200 }, () => newTokenId());
  assert.equal(new Set(tokens.map((token) => token.slice(0, 8))).size, tokens.length, 'random');
});
