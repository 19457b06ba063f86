import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueCounts } from '../../src/queue/message-queries.js';
import { waitUntil } from '../helpers/client.js';
import { capturedLogger } from '../helpers/logs.js';
import { database, dispatch, enqueue, QUEUE } from '../helpers/pg-boss-dispatch.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { onPostgres } from '../helpers/test-database.js';

describe('pg-boss dispatch', { skip: onPostgres ? false : 'pg-boss needs PostgreSQL' }, () => {
  test('a message exists exactly when the transaction that sent it committed', async (t) => {
    const { url, store } = await database(t);
    const queue = await dispatch(t, { connectionString: url });
    const delivered: string[] = [];
    await queue.work(QUEUE, { slots: 2, perGroup: 2 }, async (jobId) => {
      delivered.push(jobId);
    });

    await assert.rejects(
      store.transaction(async (trx) => {
        assert.equal(await queue.enqueue(trx.db, QUEUE, 'rolled-back', { group: 'a' }), true);
        throw new Error('the commit of the job failed');
      }),
      /the commit of the job failed/,
    );
    let seenOutside: QueueCounts | undefined;
    await store.transaction(async (trx) => {
      assert.equal(await queue.enqueue(trx.db, QUEUE, 'committed', { group: 'a' }), true);
      assert.equal(
        await queue.enqueue(trx.db, QUEUE, 'committed', { group: 'a' }),
        false,
        'a waiting id is not queued twice',
      );
      // Not visible to anyone (workers included) before the commit.
      seenOutside = (await queue.queueStats())[QUEUE];
      await sleep(1500);
      assert.deepEqual(delivered, [], 'nothing is delivered before the commit');
    });
    assert.deepEqual(seenOutside, { queued: 0, deferred: 0, active: 0 });
    await waitUntil('the committed message is delivered', () => delivered.length > 0);
    await sleep(2000);
    assert.deepEqual(delivered, ['committed'], 'delivered once; the rolled-back one never');
  });

  test('a handler that throws has its message re-delivered; one cut short by stop goes to another process', async (t) => {
    const { url, store } = await database(t);
    const first = await dispatch(t, { connectionString: url });
    const attempts: string[] = [];
    let started = () => {};
    const holding = new Promise<void>((resolve) => {
      started = resolve;
    });
    await first.work(QUEUE, { slots: 1, perGroup: 1 }, async (jobId, signal) => {
      attempts.push(jobId);
      if (jobId === 'flaky' && attempts.length === 1) throw new Error('the store was away');
      if (jobId === 'long') {
        started();
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      }
    });
    await enqueue(store, first, 'flaky', 'a');
    await waitUntil('the failed attempt is delivered again', () => attempts.length === 2);
    assert.deepEqual(attempts, ['flaky', 'flaky']);

    await enqueue(store, first, 'long', 'a');
    await holding;
    const second = await dispatch(t, { connectionString: url });
    const taken: string[] = [];
    await second.work(QUEUE, { slots: 1, perGroup: 1 }, async (jobId) => {
      taken.push(jobId);
    });
    const stopped = performance.now();
    await first.stop(500);
    await waitUntil('the other process takes it', () => taken.includes('long'), 10_000);
    t.diagnostic(`taken over ${(performance.now() - stopped).toFixed(0)} ms after stop`);
  });

  test('a handler may queue its own job again for later; a waiting one is not doubled', async (t) => {
    const { url, store } = await database(t);
    const queue = await dispatch(t, { connectionString: url });
    const runs: number[] = [];
    const requeued: boolean[] = [];
    await queue.work(QUEUE, { slots: 1, perGroup: 1 }, async (jobId) => {
      runs.push(performance.now());
      if (runs.length > 1) return;
      const later = new Date(Date.now() + 1000);
      // As a failed attempt would: its next run, committed with the release of its row.
      requeued.push(await enqueue(store, queue, jobId, 'a', later));
      requeued.push(await enqueue(store, queue, jobId, 'a', later));
    });
    await enqueue(store, queue, 'again', 'a');
    await waitUntil('it runs again', () => runs.length === 2, 10_000);
    assert.deepEqual(requeued, [true, false]);
    const gap = (runs[1] ?? 0) - (runs[0] ?? 0);
    assert.ok(gap >= 900, `the next run waited for its start (${gap.toFixed(0)} ms)`);
    await sleep(1500);
    assert.equal(runs.length, 2);
  });

  test('queue stats count queued, deferred and active messages, live', async (t) => {
    const { url, store } = await database(t);
    const queue = await dispatch(t, { connectionString: url });
    for (let i = 0; i < 3; i++) await enqueue(store, queue, `now-${i}`, 'a');
    for (let i = 0; i < 2; i++) {
      await enqueue(store, queue, `later-${i}`, 'a', new Date(Date.now() + 3_600_000));
    }
    const before = await queue.queueStats();
    assert.deepEqual(before[QUEUE], { queued: 3, deferred: 2, active: 0 });
    assert.deepEqual(Object.keys(before), ['assay.callback'], 'the one queue the service creates');

    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let taken = 0;
    await queue.work(QUEUE, { slots: 2, perGroup: 5 }, async () => {
      taken++;
      await held;
    });
    await waitUntil('two are taken', () => taken === 2);
    assert.deepEqual((await queue.queueStats())[QUEUE], { queued: 1, deferred: 2, active: 2 });
    release();
    await waitUntil('all due ones are done', async () => {
      const counts = (await queue.queueStats())[QUEUE];
      return counts?.queued === 0 && counts.active === 0;
    });
    assert.deepEqual((await queue.queueStats())[QUEUE], { queued: 0, deferred: 2, active: 0 });
  });

  test('a database outage is logged, not fatal, and delivery resumes after it', async (t) => {
    const { url, store } = await database(t);
    const direct = new URL(url);
    const proxy = await startTcpProxy(direct.hostname, Number(direct.port));
    t.after(() => proxy.close());
    const relayed = new URL(url);
    relayed.host = proxy.address;
    const log = capturedLogger();
    const queue = await dispatch(t, { connectionString: relayed.href, logger: log.logger });
    const delivered: string[] = [];
    await queue.work(QUEUE, { slots: 2, perGroup: 2 }, async (jobId) => {
      delivered.push(jobId);
    });
    await enqueue(store, queue, 'before', 'a');
    await waitUntil('delivered before the outage', () => delivered.includes('before'));

    proxy.cut();
    // The store still reaches the database: work accepted during the dispatcher's outage waits.
    await enqueue(store, queue, 'during', 'a');
    await sleep(4000);
    await assert.rejects(queue.queueStats(), 'the dispatcher cannot reach the database');
    assert.ok(
      log.records().some((record) => record.msg === 'pg-boss error'),
      'the failed polls are logged',
    );
    assert.ok(!delivered.includes('during'));

    proxy.restore();
    await waitUntil('delivered after the outage', () => delivered.includes('during'), 30_000);
    await enqueue(store, queue, 'after', 'a');
    await waitUntil('new work is delivered', () => delivered.includes('after'), 10_000);
    assert.deepEqual(delivered, ['before', 'during', 'after']);
  });
});
