import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitUntil } from '../helpers/client.js';
import { nodeArgsOf } from '../helpers/entry.js';
import { database, dispatch, enqueue, FAST, QUEUE } from '../helpers/pg-boss-dispatch.js';
import { onPostgres } from '../helpers/test-database.js';

// @run-alone: times dispatch: re-delivery within 20.5 s, B within 5 s, due within 2 s

/** What the module documents: heartbeat + two monitor passes + the first retry delay + a poll. */
const LIVENESS_BOUND_MS =
  (FAST.heartbeatSeconds + 2 * FAST.monitorSeconds + 1 + FAST.pollSeconds) * 1000;

describe('pg-boss dispatch', { skip: onPostgres ? false : 'pg-boss needs PostgreSQL' }, () => {
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
});
