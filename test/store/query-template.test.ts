import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { QueryTemplate } from '../../src/store/query-template.js';
import { tempDir } from '../helpers/service.js';
import { addAccount, openTestStore } from '../helpers/store-fixture.js';
import { prepareStore } from '../helpers/test-database.js';

async function storeForTest(t: { after: (fn: () => unknown) => void }) {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const store = await openStore(
    loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
  );
  t.after(() => store.close());
  return store;
}

test('a query template runs with each call’s own arguments, inside and outside a transaction', async (t) => {
  const store = await storeForTest(t);
  const named = new QueryTemplate(2, (db, name: string, email: string) =>
    db
      .selectFrom('accounts')
      .select('id')
      .where('name', '=', name)
      .where('billing_email', '=', email)
      .orderBy('id')
      .limit(5),
  );
  for (const [i, name] of ['ann', 'bob', 'cy'].entries()) {
    await store.accounts.insert({
      id: `${i}`.padStart(32, '0'),
      name,
      billingEmail: `${name}@example.com`,
      subscription: '',
      balance: 0,
      startingBalance: 0,
      enforceBalance: false,
      creationDate: '2026-01-01T00:00:00Z',
      modificationDate: '2026-01-01T00:00:00Z',
      callbackSecret: 'secret',
      active: true,
    });
  }
  const ids = async (name: string, email: string) =>
    (await named.execute(store.db, name, email)).rows.map((row) => row.id);
  assert.deepEqual(await ids('bob', 'bob@example.com'), ['1'.padStart(32, '0')]);
  assert.deepEqual(
    await ids('cy', 'cy@example.com'),
    ['2'.padStart(32, '0')],
    'not the first call’s',
  );
  assert.deepEqual(await ids('cy', 'bob@example.com'), [], 'both arguments count');
  const inTransaction = await store.transaction(async (trx) => {
    await trx.accounts.update('0'.padStart(32, '0'), { name: 'dee' }, '2026-01-02T00:00:00Z');
    return (await named.execute(trx.db, 'dee', 'ann@example.com')).rows.length;
  });
  assert.equal(inTransaction, 1, 'sees the transaction’s own write');
});

test('a template whose builder does not pass an argument through is refused, not run wrong', async (t) => {
  const store = await storeForTest(t);
  // The argument is transformed while building: the placeholder would be baked into the SQL.
  const transformed = new QueryTemplate(1, (db, name: string) =>
    db.selectFrom('accounts').select('id').where('name', '=', name.toUpperCase()),
  );
  await assert.rejects(transformed.execute(store.db, 'ann'), /used 0 of its 1 arguments/);
});

test('templates run on the connection’s transactions as Kysely would: rolled back with one, blind to another’s open one', async (t) => {
  const { store } = await openTestStore(t);
  const rename = new QueryTemplate(2, (db, id: string, name: string) =>
    db.updateTable('accounts').set({ name }).where('id', '=', id),
  );
  const nameOf = new QueryTemplate(1, (db, id: string) =>
    db.selectFrom('accounts').select('name').where('id', '=', id),
  );
  const id = '1'.padStart(32, '0');
  await addAccount(store, id);
  const read = async () => (await nameOf.execute(store.db, id)).rows[0]?.name;

  // A template's write inside a transaction that fails is undone with it.
  await assert.rejects(
    store.transaction(async (trx) => {
      await rename.execute(trx.db, id, 'bob');
      assert.equal((await nameOf.execute(trx.db, id)).rows[0]?.name, 'bob');
      throw new Error('abandoned');
    }),
    /abandoned/,
  );
  assert.equal(await read(), id, 'rolled back');

  // A read outside, while another transaction has written and not ended, never sees its write.
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let written = () => {};
  const hasWritten = new Promise<void>((resolve) => {
    written = resolve;
  });
  const open = store.transaction(async (trx) => {
    await rename.execute(trx.db, id, 'cy');
    written();
    await held;
    throw new Error('rolled back at last');
  });
  await hasWritten;
  const outside = read();
  release();
  await assert.rejects(open, /rolled back at last/);
  assert.equal(await outside, id, 'the other transaction’s write was never committed');
});
