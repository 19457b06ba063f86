import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';

interface Start {
  pid: number;
  execArgv: string[];
  /** glibc's arena limit in the start's environment. */
  arenas: string | null;
  /** glibc's mmap threshold in the start's environment. */
  mmapThreshold: string | null;
}

/**
 * `bin/assay.js serve` restarts itself once with V8's heap flags and glibc's arena limit and mmap
 * threshold (docs/ARCHITECTURE.md, Memory). A module preloaded through NODE_OPTIONS (which the
 * restart keeps) prints each start's pid, node flags, MALLOC_ARENA_MAX and MALLOC_MMAP_THRESHOLD_;
 * a bad port ends the service right after its start, built or not.
 */
function starts(
  nodeOptions: string,
  command = 'serve',
  arenas?: string,
  nodeArgs: string[] = [],
): Start[] {
  const report =
    'console.error("start "+JSON.stringify({pid:process.pid,execArgv:process.execArgv,arenas:process.env.MALLOC_ARENA_MAX??null,mmapThreshold:process.env.MALLOC_MMAP_THRESHOLD_??null}))';
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_OPTIONS: `${nodeOptions} --import=data:text/javascript,${encodeURIComponent(report)}`,
    ASSAY_PORT: 'not-a-port',
  };
  delete env.MALLOC_ARENA_MAX;
  delete env.MALLOC_MMAP_THRESHOLD_;
  if (arenas !== undefined) env.MALLOC_ARENA_MAX = arenas;
  const result = spawnSync(process.execPath, [...nodeArgs, 'bin/assay.js', command], {
    env,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return result.stderr
    .split('\n')
    .filter((line) => line.startsWith('start '))
    .map((line) => JSON.parse(line.slice('start '.length)) as Start);
}

describe('assay serve: V8 heap flags and malloc arenas', () => {
  test('serve restarts once, in the same process, with its V8 flags and two malloc arenas', () => {
    const [first, second, ...more] = starts('');
    assert.ok(first && second, 'two starts');
    assert.deepEqual(more, []);
    assert.deepEqual(first.execArgv, []);
    assert.equal(first.arenas, null);
    assert.deepEqual(second.execArgv, [
      '--max-semi-space-size=16',
      '--initial-old-space-size=64',
      '--no-memory-reducer',
      '--heap-growing-percent=200',
      '--invocation-count-for-turbofan=1000',
    ]);
    assert.equal(second.arenas, '2');
    assert.equal(first.mmapThreshold, null);
    assert.equal(second.mmapThreshold, String(4 * 1024 * 1024));
    assert.equal(second.pid, first.pid, 'execve keeps the pid');
  });

  test('a flag the user set is kept: only the others are added', () => {
    const runs = starts('--max-semi-space-size=8');
    assert.equal(runs.length, 2);
    assert.deepEqual(runs[1]?.execArgv, [
      '--initial-old-space-size=64',
      '--no-memory-reducer',
      '--heap-growing-percent=200',
      '--invocation-count-for-turbofan=1000',
    ]);
    // V8's schedule flags are not allowed in NODE_OPTIONS: node options then, kept as given.
    const own = starts('', 'serve', undefined, [
      '--memory-reducer',
      '--invocation-count-for-turbofan=500',
    ]);
    assert.equal(own.length, 2);
    assert.deepEqual(own[1]?.execArgv, [
      '--max-semi-space-size=16',
      '--initial-old-space-size=64',
      '--heap-growing-percent=200',
      '--memory-reducer',
      '--invocation-count-for-turbofan=500',
    ]);
  });

  test("the user's arena limit is kept; with it and every flag set, serve starts once", () => {
    const runs = starts('', 'serve', '4');
    assert.deepEqual(
      runs.map((run) => run.arenas),
      ['4', '4'],
    );
    // --initial-old-space-size is not allowed in NODE_OPTIONS: a node option then.
    const set = starts('--max-semi-space-size=8', 'serve', '1', [
      '--initial-old-space-size=32',
      '--no-memory-reducer',
      '--heap-growing-percent=100',
      '--invocation-count-for-turbofan=2000',
    ]);
    assert.equal(set.length, 1);
    assert.equal(set[0]?.arenas, '1');
  });

  test('other commands run as they are', () => {
    assert.equal(starts('', 'admin').length, 1);
  });
});
