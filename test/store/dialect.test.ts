import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PostgresAdapter, SqliteAdapter } from 'kysely';
import { buildService } from '../helpers/service.js';
import { TEST_STORE } from '../helpers/test-database.js';

test('the suite runs on the store it names (ASSAY_TEST_STORE)', async (t) => {
  const svc = await buildService(t);
  const adapter = svc.store.db.getExecutor().adapter;
  const expected = TEST_STORE === 'postgres' ? PostgresAdapter : SqliteAdapter;
  assert.ok(adapter instanceof expected, `expected ${TEST_STORE}, got ${adapter.constructor.name}`);
});

test('trace events keep their order, and none is lost, when written from many places at once', async (t) => {
  const svc = await buildService(t);
  const fileId = 'f'.repeat(32);
  // Two writers interleaving, as the job runner and the callback dispatcher may on two processes.
  await Promise.all(
    Array.from({ length: 20 }, (_, writer) =>
      svc.store.transaction((store) =>
        store.trace.appendAll(fileId, [
          { timestamp: new Date().toISOString(), message: `${writer}:a` },
          { timestamp: new Date().toISOString(), message: `${writer}:b` },
        ]),
      ),
    ),
  );
  const events = await svc.store.trace.list(fileId);
  assert.equal(events.length, 40);
  for (let writer = 0; writer < 20; writer++) {
    const a = events.findIndex((event) => event.message === `${writer}:a`);
    const b = events.findIndex((event) => event.message === `${writer}:b`);
    // Concurrent writers may interleave; each one's events keep their order, and none is lost.
    assert.ok(a >= 0 && b > a, `writer ${writer}'s events are in order`);
  }
});
