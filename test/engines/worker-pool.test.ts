import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkerPool } from '../../src/engines/worker-pool.js';
import { tempDir } from '../helpers/service.js';

const signal = () => AbortSignal.timeout(10_000);

test('a worker that cannot be replaced is started again later: the pool recovers by itself', async (t) => {
  const dir = tempDir();
  const failStartWhile = join(dir, 'fail-start');
  const log: string[] = [];
  const pool = await WorkerPool.create<string, string>({
    name: 'flaky',
    // Relative to src/engines, like the engines' own scripts.
    script: '../../test/helpers/flaky-worker',
    size: 1,
    workerData: { failStartWhile },
    log: (message) => log.push(message),
  });
  t.after(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });
  assert.equal(await pool.run('one', signal()), 'echo: one');

  // The worker dies, and its replacements cannot start for a while.
  writeFileSync(failStartWhile, '');
  await assert.rejects(pool.run('exit', signal()), /worker failed/);
  await assert.rejects(pool.run('while none starts', signal()), /failed to start/);
  assert.ok(
    log.some((line) => /could not restart.*trying again in \d+ ms/.test(line)),
    log.join('\n'),
  );

  rmSync(failStartWhile);
  const deadline = Date.now() + 10_000;
  let answer = '';
  while (answer === '' && Date.now() < deadline) {
    answer = await pool.run('two', signal()).catch(() => '');
    if (answer === '') await sleep(100);
  }
  assert.equal(answer, 'echo: two', 'a worker started again once starting works');
});

test('workers start as requests wait, up to the pool’s size, and the extra ones stop when idle', async (t) => {
  const dir = tempDir();
  const pool = await WorkerPool.create<string, string>({
    name: 'growing',
    script: '../../test/helpers/flaky-worker',
    size: 3,
    workerData: { failStartWhile: join(dir, 'never') },
    idleWorkerMs: 300,
  });
  t.after(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });
  assert.equal(pool.size, 1, 'one worker until a request waits');
  assert.equal(await pool.run('one at a time', signal()), 'echo: one at a time');
  assert.equal(await pool.run('again', signal()), 'echo: again');
  assert.equal(pool.size, 1, 'requests one after another need no second worker');

  let most = pool.size;
  const watch = setInterval(() => {
    most = Math.max(most, pool.size);
  }, 10);
  const answers = await Promise.all(
    Array.from({ length: 5 }, (_, i) => pool.run(`sleep:300 ${i}`, signal())),
  );
  clearInterval(watch);
  assert.deepEqual(
    answers,
    Array.from({ length: 5 }, (_, i) => `echo: sleep:300 ${i}`),
  );
  assert.equal(most, 3, 'five waiting requests: as many workers as the pool allows');

  const deadline = Date.now() + 10_000;
  while (pool.size > 1 && Date.now() < deadline) await sleep(50);
  assert.equal(pool.size, 1, 'the extra workers stopped after 300 ms without work');
  assert.equal(await pool.run('after', signal()), 'echo: after', 'the one left still answers');
});
