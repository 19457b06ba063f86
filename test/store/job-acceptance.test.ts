import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { notifyChannelSql } from 'pg-boss/dist/plans.js';
import { JobSignals } from '../../src/queue/job-signals.js';
import type { Store } from '../../src/store/store.js';
import { addAccount, openTestStore, pendingUpload } from '../helpers/store-fixture.js';
import { onPostgres, storeEnv } from '../helpers/test-database.js';

/**
 * The signals a deployment's commit sends (pg-boss's channel, as PgBossDispatch listens to it):
 * `heard` collects their payloads; null on SQLite, which signals nothing.
 */
async function listenForSignals(
  t: { after: (fn: () => unknown) => void },
  dataDir: string,
): Promise<{ heard: string[]; store: (plain: Store) => Store } | null> {
  if (!onPostgres) return null;
  const url = storeEnv(dataDir).ASSAY_DATABASE_URL;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.after(() => client.end());
  const { rows } = await client.query(`SELECT ${notifyChannelSql('pgboss')} AS channel`);
  await client.query(`LISTEN "${String(rows[0].channel)}"`);
  const heard: string[] = [];
  client.on('notification', (message) => heard.push(message.payload ?? ''));
  const signals = new JobSignals('pgboss');
  return {
    heard,
    // The store's dispatch as PgBossDispatch gives it, for the signals alone (no queue is used).
    store: (plain) =>
      plain.dispatchingTo({
        send: async () => {},
        signal: (db, due) => signals.send(db, [due]),
        signalQuery: (dues) => signals.query(dues),
      }),
  };
}

const received = (message: string) => ({ timestamp: new Date().toISOString(), message });

describe('acceptances together (JobRepository.acceptMany)', () => {
  test('each account pays for its items; one whose balance runs out has what it pays for accepted, in order; jobs, contents and first events whole', async (t) => {
    const { store: plain, dataDir } = await openTestStore(t);
    await addAccount(plain, 'account-a');
    await addAccount(plain, 'account-b', 2, { enforceBalance: true });
    const listening = await listenForSignals(t, dataDir);
    const store = listening?.store(plain) ?? plain;
    const items = [
      pendingUpload('account-a'),
      pendingUpload('account-b'),
      pendingUpload('account-a'),
      pendingUpload('account-b'),
      pendingUpload('account-b'),
    ].map((job, n) => ({ job, received: received(`received ${n}`) }));
    const accepted = await store.jobs.acceptMany(items);
    assert.deepEqual(accepted, [true, true, true, true, false], "B's third is past its balance");
    assert.equal((await store.accounts.find('account-a'))?.balance, 998);
    assert.equal((await store.accounts.find('account-b'))?.balance, 0);
    for (const [n, { job }] of items.entries()) {
      const stored = await store.jobs.findForAccount(job.accountId, job.id);
      if (!accepted[n]) {
        assert.equal(stored, null, 'nothing written of a refused item');
        assert.deepEqual(await store.trace.list(job.id), []);
        continue;
      }
      assert.equal(stored?.state, 'pending');
      assert.equal(stored?.creditHeld, true);
      assert.equal(stored?.stage, 'scan');
      assert.deepEqual(stored?.content, job.content, 'the content, byte for byte');
      assert.deepEqual(
        (await store.trace.list(job.id)).map((event) => event.message),
        [`received ${n}`],
      );
    }
    if (listening !== null) {
      // Each account with a due job is signalled once, with the commit.
      const deadline = Date.now() + 5000;
      while (listening.heard.length < 2 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.deepEqual(
        new Set(listening.heard),
        new Set(['assay-job:scan:account-a', 'assay-job:scan:account-b']),
      );
    }
  });

  test('a group refused whole writes nothing and takes no credit', async (t) => {
    const { store } = await openTestStore(t);
    await addAccount(store, 'account-b', 0, { enforceBalance: true });
    const items = [pendingUpload('account-b'), pendingUpload('account-b')].map((job) => ({
      job,
      received: received('received'),
    }));
    assert.deepEqual(await store.jobs.acceptMany(items), [false, false]);
    assert.equal((await store.accounts.find('account-b'))?.balance, 0);
    assert.equal(await store.jobs.exists(items[0]?.job.id ?? ''), false);
  });
});
