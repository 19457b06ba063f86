import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId, newTokenId } from '../../src/accounts/credentials.js';
import type { StoredFile, TraceEvent } from '../../src/domain/records.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';

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
    fileName: 'Q3 “report”.pdf',
  };
}

const eventsOf = (count: number): TraceEvent[] =>
  Array.from({ length: count }, (_, i) => ({
    timestamp: `2026-11-23T10:00:00.${String(i).padStart(3, '0')}Z`,
    message: `event ${i}`,
  }));

test('results’ rows, their whole traces in order and their charges are written together, each only while its job is there', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, ACCOUNT, 100);
  // 5 events, 20, none charged, and an error: written together (one statement on PostgreSQL).
  const cases = [
    { id: '1'.repeat(32), findings: [], events: 5, credits: -1 },
    { id: '2'.repeat(32), findings: ['Win.Test.EICAR_HDB-1'], events: 20, credits: -1 },
    { id: '3'.repeat(32), findings: [], events: 3, credits: 0 },
    { id: '4'.repeat(32), findings: null, events: 1, credits: 1 },
  ];
  // Two finish jobs: one still there, one finished before (its result must not be written again).
  const job = 'j'.repeat(32);
  await store.jobs.insert({
    id: job,
    accountId: ACCOUNT,
    apiKeyId: 'key',
    apiVersion: 'v2.2',
    kind: 'upload',
    state: 'processing',
    location: null,
    spoolKey: job,
    metadata: {},
    callback: null,
    attempts: 1,
    runAfter: '2026-11-23T10:00:00.000Z',
    creationDate: '2026-11-23T10:00:00.000Z',
  });
  const gone = '5'.repeat(32);
  const written = await store.results.recordFinished([
    ...cases.map(({ id, findings, events, credits }) => ({
      file: fileOf(id, findings),
      ...(id === '3'.repeat(32) ? { jobId: job } : {}),
      verdictKey: findings === null ? null : `key-${id}`,
      credits,
      events: eventsOf(events),
    })),
    {
      file: fileOf(gone, []),
      jobId: 'g'.repeat(32),
      verdictKey: null,
      credits: -5,
      events: eventsOf(2),
    },
  ]);
  assert.deepEqual(written, [true, true, true, true, false]);
  for (const { id, findings, events } of cases) {
    assert.deepEqual(await store.files.findForAccount(ACCOUNT, id), fileOf(id, findings));
    assert.deepEqual(await store.trace.list(id), eventsOf(events), `the trace of ${id[0]}`);
  }
  assert.equal(await store.jobs.find(job), null, 'the job ends with its result');
  assert.equal(await store.files.findForAccount(ACCOUNT, gone), null, 'nothing for a finished job');
  assert.deepEqual(await store.trace.list(gone), []);
  assert.equal((await store.accounts.find(ACCOUNT))?.balance, 99, '100 - 1 - 1 + 0 + 1, not - 5');
  const reused = await store.files.findVerdict(`key-${'2'.repeat(32)}`, '2026-01-01T00:00:00Z');
  assert.deepEqual(reused?.findings, ['Win.Test.EICAR_HDB-1'], 'stored under its verdict key');
  const [again] = await store.results.recordFinished([
    { file: fileOf('6'.repeat(32), []), jobId: job, verdictKey: null, credits: -1, events: [] },
  ]);
  assert.equal(again, false, 'a job finishes once');
});

test('a result without a job keeps its trace in its row; events added later follow it', async (t) => {
  const { store } = await openTestStore(t);
  await addAccount(store, ACCOUNT, 0);
  // Two at once (one statement on PostgreSQL), then one alone.
  const ids = ['7'.repeat(32), '8'.repeat(32), '9'.repeat(32)];
  const events = eventsOf(6).map((event, i) => ({ ...event, message: `${event.message} “${i}”` }));
  const rowsOf = (id: string) => ({
    file: fileOf(id, []),
    verdictKey: null,
    credits: -1,
    events,
  });
  assert.deepEqual(await store.results.recordFinished(ids.slice(0, 2).map(rowsOf)), [true, true]);
  assert.deepEqual(await store.results.recordFinished([rowsOf(ids[2] as string)]), [true]);
  const rows = await store.db
    .selectFrom('trace_events')
    .select('file_id')
    .where('file_id', 'in', ids)
    .execute();
  assert.deepEqual(rows, [], 'no trace rows: the events are in the result’s row');
  const later = { timestamp: '2026-11-23T10:00:01.000Z', message: 'callback delivered' };
  await store.trace.append(ids[0] as string, later.message, later.timestamp);
  assert.deepEqual(await store.trace.list(ids[0] as string), [...events, later]);
  assert.deepEqual(await store.trace.list(ids[2] as string), events);
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
