import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { newId } from '../../src/accounts/credentials.js';
import type { Job, StoredFile } from '../../src/domain/records.js';
import { CLAIMED_VERDICTS_MAX } from '../../src/store/claimed-verdicts.js';
import type { Store } from '../../src/store/store.js';
import { addAccount, openTestStore, pendingUpload } from '../helpers/store-fixture.js';
import { onPostgres } from '../helpers/test-database.js';

const ACCOUNT = 'account-a';
const hex = (content: Buffer) => createHash('sha256').update(content).digest('hex');

/** A complete verdict stored for `content` under a key of its hash and `rest`, received at `at`. */
async function storeVerdict(
  store: Store,
  content: Buffer,
  rest: string,
  at: string,
  findings: string[] = [],
): Promise<StoredFile> {
  const file: StoredFile = {
    id: newId(),
    accountId: ACCOUNT,
    apiKeyId: `key-${ACCOUNT}`,
    checksum: 'c'.repeat(40),
    sha256: hex(content),
    contentLength: content.length,
    contentType: 'text/plain',
    findings,
    metadata: {},
    callback: null,
    error: null,
    creationDate: at,
  };
  await store.files.insert(file, `${hex(content)}${rest}`);
  return file;
}

/** Three small uploads (content with one verdict, with none, with more than a claim brings) and a spooled one. */
async function setUp(store: Store) {
  await addAccount(store, ACCOUNT);
  const [once, never, often] = [
    pendingUpload(ACCOUNT, 4000),
    pendingUpload(ACCOUNT, 3000),
    pendingUpload(ACCOUNT, 2000),
  ] as [Job, Job, Job];
  const spooled: Job = { ...pendingUpload(ACCOUNT, 1000), content: null, spoolKey: newId() };
  for (const job of [once, never, often, spooled]) await store.jobs.insert(job);
  const content = (job: Job) => job.content as Buffer;
  const recent = new Date(Date.now() - 60_000).toISOString();
  const verdict = await storeVerdict(store, content(once), 'a'.repeat(64), recent, ['Found']);
  // Too old for the cache's time, and another content's that shares no prefix: neither comes.
  await storeVerdict(store, content(once), 'b'.repeat(64), '2020-01-01T00:00:00.000Z');
  for (let n = 0; n <= CLAIMED_VERDICTS_MAX; n++) {
    await storeVerdict(store, content(often), n.toString(16).padStart(64, '0'), recent);
  }
  return { once, never, often, spooled, verdict };
}

const since = () => new Date(Date.now() - 3_600_000).toISOString();
const lease = () => new Date(Date.now() + 60_000).toISOString();

describe('verdicts found with a claim (claimedVerdictsColumn)', () => {
  test('a claim of small uploads brings their content’s earlier verdicts on PostgreSQL: all of them, or word that there are more; none for spooled content', async (t) => {
    const { store } = await openTestStore(t);
    const { once, never, often, spooled, verdict } = await setUp(store);
    const now = new Date().toISOString();
    const claimed = await store.jobs.claimDue('scan', ACCOUNT, now, lease(), 2, undefined, {
      since: since(),
    });
    assert.deepEqual(
      claimed.map((job) => job.id),
      [once.id, never.id],
    );
    const [first, second] = claimed as [Job, Job];
    if (!onPostgres) {
      // SQLite looks verdicts up in the process, a statement costing no round trip.
      assert.equal(first.earlierVerdicts, undefined);
      assert.equal(second.earlierVerdicts, undefined);
      return;
    }
    assert.deepEqual(first.earlierVerdicts, {
      complete: true,
      verdicts: [
        {
          key: `${hex(once.content as Buffer)}${'a'.repeat(64)}`,
          fileId: verdict.id,
          receivedAt: verdict.creationDate,
          contentType: 'text/plain',
          findings: ['Found'],
        },
      ],
    });
    assert.deepEqual(second.earlierVerdicts, { complete: true, verdicts: [] });
    const many = await store.jobs.claim(often.id, now, lease(), 'scan', { since: since() });
    assert.equal(many?.earlierVerdicts?.complete, false, 'more than a claim brings');
    assert.equal(many?.earlierVerdicts?.verdicts.length, CLAIMED_VERDICTS_MAX);
    const unspooled = await store.jobs.claim(spooled.id, now, lease(), 'scan', { since: since() });
    assert.ok(unspooled !== null);
    assert.equal(unspooled.earlierVerdicts, undefined, 'spooled content is not in the database');
  });

  test('unasked, a claim brings none', async (t) => {
    const { store } = await openTestStore(t);
    const { once } = await setUp(store);
    const [job] = await store.jobs.claimDue('scan', ACCOUNT, new Date().toISOString(), lease(), 1);
    assert.equal(job?.id, once.id);
    assert.equal(job?.earlierVerdicts, undefined);
  });

  test('a slot handed on with results brings the next job’s verdicts too', async (t) => {
    const { store } = await openTestStore(t);
    const { once } = await setUp(store);
    const finished = await storeVerdict(
      store,
      Buffer.from('other'),
      'c'.repeat(64),
      new Date().toISOString(),
    );
    const handedOn = await store.results.recordFinishedClaiming(
      [
        {
          file: { ...finished, id: newId() },
          verdictKey: null,
          credits: 0,
          events: [],
        },
      ],
      {
        stage: 'scan',
        accountId: ACCOUNT,
        limit: 1,
        now: new Date().toISOString(),
        leaseUntil: lease(),
        skip: [],
        verdicts: { since: since() },
      },
    );
    assert.deepEqual(handedOn.written, [true]);
    const [next] = handedOn.claimed;
    assert.equal(next?.id, once.id);
    if (!onPostgres) {
      assert.equal(next?.earlierVerdicts, undefined);
      return;
    }
    assert.deepEqual(
      next?.earlierVerdicts?.verdicts.map((found) => found.findings),
      [['Found']],
    );
  });
});
