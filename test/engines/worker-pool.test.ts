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
