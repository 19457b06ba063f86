import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueCounts } from '../../src/queue/message-queries.js';
import { PgBossDispatch, type PgBossDispatchOptions } from '../../src/queue/pg-boss-dispatch.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { waitUntil } from '../helpers/client.js';
import { nodeArgsOf } from '../helpers/entry.js';
import { capturedLogger } from '../helpers/logs.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

// @run-alone: times dispatch: re-delivery within 20.5 s, B within 5 s, due within 2 s

// The adapter's own tests work a queue of the service's (what the store sends on it does not matter).
const QUEUE = 'assay.callback';
// The shortest heartbeat pg-boss takes, and a quick monitor, so a lost job comes back in seconds.
const FAST = { heartbeatSeconds: 10, monitorSeconds: 2, pollSeconds: 0.5 } as const;
/** What the module documents: heartbeat + two monitor passes + the first retry delay + a poll. */
const LIVENESS_BOUND_MS =
  (FAST.heartbeatSeconds + 2 * FAST.monitorSeconds + 1 + FAST.pollSeconds) * 1000;

async function database(t: TestContext): Promise<{ url: string; store: Store }> {
  const url = await freshPostgresDatabase();
  const store = await openStore({ dataDir: '', databaseUrl: url, databasePoolSize: 4 });
  t.after(() => store.close());
  return { url, store };
}

async function dispatch(
  t: TestContext,
  options: Omit<PgBossDispatchOptions, 'logger'> & Partial<Pick<PgBossDispatchOptions, 'logger'>>,
): Promise<PgBossDispatch> {
  const instance = new PgBossDispatch({ ...FAST, logger: capturedLogger().logger, ...options });
  await instance.start();
  t.after(() => instance.stop(0));
  return instance;
}

/** Enqueues in a transaction of its own, committed. */
function enqueue(
  store: Store,
  queue: PgBossDispatch,
  jobId: string,
  group: string,
  startAfter?: Date,
): Promise<boolean> {
  return store.transaction((trx) =>
    queue.enqueue(trx.db, QUEUE, jobId, {
      group,
      ...(startAfter === undefined ? {} : { startAfter }),
    }),
  );
}

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

  test('at most perGroup jobs of one account run at once across two processes; another account is not held up', async (t) => {
    const { url, store } = await database(t);
    const first = await dispatch(t, { connectionString: url });
    const second = await dispatch(t, { connectionString: url });
    const running = new Map<string, number>();
    const most = new Map<string, number>();
    const started = new Map<string, number>();
    const done: string[] = [];
    const handler = async (jobId: string) => {
      const group = jobId.split('-')[0] ?? '';
      started.set(jobId, performance.now());
      const now = (running.get(group) ?? 0) + 1;
      running.set(group, now);
      most.set(group, Math.max(most.get(group) ?? 0, now));
      await sleep(200);
      running.set(group, (running.get(group) ?? 0) - 1);
      done.push(jobId);
    };
    await first.work(QUEUE, { slots: 4, perGroup: 2 }, handler);
    await second.work(QUEUE, { slots: 4, perGroup: 2 }, handler);

    // One commit: its NOTIFY wakes all 8 slots at once, so their fetches race.
    await store.transaction(async (trx) => {
      for (let i = 0; i < 20; i++) {
        await first.enqueue(trx.db, QUEUE, `A-${i}`, { group: 'account-a' });
      }
    });
    await waitUntil('account A runs', () => (running.get('A') ?? 0) > 0);
    const sent = performance.now();
    await enqueue(store, second, 'B-0', 'account-b');
    await waitUntil('account B runs', () => started.has('B-0'), 10_000);
    const waitedMs = (started.get('B-0') ?? 0) - sent;
    await waitUntil('every job of A is done', () => done.length === 21, 30_000);

    assert.equal(most.get('A'), 2, 'account A never had more than 2 running, in both processes');
    assert.ok(done.indexOf('B-0') < 19, `B ran before A's backlog was through (${done})`);
    assert.ok(waitedMs < 5000, `B started ${waitedMs.toFixed(0)} ms after its commit`);
    t.diagnostic(`B waited ${waitedMs.toFixed(0)} ms behind 20 jobs of A`);
  });

  test('a job held by a process killed with SIGKILL is delivered to another within the bound', async (t) => {
    const { url, store } = await database(t);
    const options = { connectionString: url, ...FAST, queue: QUEUE };
    const child = spawn(
      process.execPath,
      [...nodeArgsOf('test/helpers/pg-boss-child.ts'), JSON.stringify(options)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    const lines = createInterface({ input: child.stdout ?? process.stdin });
    const said: string[] = [];
    lines.on('line', (line) => said.push(line));
    await waitUntil('the child works', () => said.includes('working'), 30_000);

    const survivor = await dispatch(t, { connectionString: url });
    await enqueue(store, survivor, 'held', 'account-a');
    await waitUntil('the child takes the job', () => said.includes('took held'), 10_000);
    // The job is the child's: the survivor only starts working now.
    const redelivered: number[] = [];
    await survivor.work(QUEUE, { slots: 1, perGroup: 1 }, async (jobId) => {
      if (jobId === 'held') redelivered.push(performance.now());
    });
    assert.equal((await survivor.queueStats())[QUEUE]?.active, 1);

    child.kill('SIGKILL');
    await once(child, 'exit');
    const killed = performance.now();
    await waitUntil('the job is delivered again', () => redelivered.length > 0, 60_000);
    const afterMs = (redelivered[0] ?? 0) - killed;
    t.diagnostic(
      `re-delivered ${afterMs.toFixed(0)} ms after SIGKILL (bound ${LIVENESS_BOUND_MS})`,
    );
    // Margin on the bound for a loaded machine.
    assert.ok(afterMs < LIVENESS_BOUND_MS + 5000, `re-delivered after ${afterMs.toFixed(0)} ms`);
    await waitUntil('it is complete', async () => {
      const counts = (await survivor.queueStats())[QUEUE];
      return counts?.active === 0 && counts.queued === 0;
    });
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

  test('a message deferred by a process that died is taken when it falls due, not at the next poll', async (t) => {
    const { url, store } = await database(t);
    // The sender defers a retry and is gone; a worker polling every 30 s starts after it.
    const sender = await dispatch(t, { connectionString: url });
    const dueAt = Date.now() + 2_000;
    assert.equal(await enqueue(store, sender, 'deferred', 'a', new Date(dueAt)), true);
    await sender.stop(0);
    const worker = await dispatch(t, { connectionString: url, pollSeconds: 30 });
    const delivered: Array<{ id: string; at: number }> = [];
    await worker.work(QUEUE, { slots: 2, perGroup: 2 }, async (jobId) => {
      delivered.push({ id: jobId, at: Date.now() });
    });
    await waitUntil('the deferred message is delivered', () => delivered.length === 1, 10_000);
    const late = (delivered[0]?.at ?? 0) - dueAt;
    t.diagnostic(`delivered ${late} ms after it fell due (poll every 30 s)`);
    assert.ok(late >= 0 && late < 2_000, `${late} ms after it fell due`);
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
