import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';

/**
 * `bin/assay.js serve` restarts itself once with V8's heap flags (docs/ARCHITECTURE.md,
 * Memory). A module preloaded through NODE_OPTIONS (which the restart keeps) prints each start's
 * pid and node flags; a bad port ends the service right after its start, built or not.
 */
function starts(
  nodeOptions: string,
  command = 'serve',
): Array<{ pid: number; execArgv: string[] }> {
  const report =
    'console.error("start "+JSON.stringify({pid:process.pid,execArgv:process.execArgv}))';
  const result = spawnSync(process.execPath, ['bin/assay.js', command], {
    env: {
      ...process.env,
      NODE_OPTIONS: `${nodeOptions} --import=data:text/javascript,${encodeURIComponent(report)}`,
      ASSAY_PORT: 'not-a-port',
    },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return result.stderr
    .split('\n')
    .filter((line) => line.startsWith('start '))
    .map((line) => JSON.parse(line.slice('start '.length)) as { pid: number; execArgv: string[] });
}

describe('assay serve: V8 heap flags', () => {
  test('serve restarts once, in the same process, with a 16 MB semi-space and a 64 MB initial old space', () => {
    const [first, second, ...more] = starts('');
    assert.ok(first && second, 'two starts');
    assert.deepEqual(more, []);
    assert.deepEqual(first.execArgv, []);
    assert.deepEqual(second.execArgv, ['--max-semi-space-size=16', '--initial-old-space-size=64']);
    assert.equal(second.pid, first.pid, 'execve keeps the pid');
  });

  test('a heap size the user set is kept: only the other flag is added', () => {
    const runs = starts('--max-semi-space-size=8');
    assert.equal(runs.length, 2);
    assert.deepEqual(runs[1]?.execArgv, ['--initial-old-space-size=64']);
  });

  test('other commands run as they are', () => {
    assert.equal(starts('', 'admin').length, 1);
  });
});
