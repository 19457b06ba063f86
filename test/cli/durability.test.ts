import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { signalGroup, startServe } from '../helpers/cli.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { onPostgres } from '../helpers/test-database.js';

const clamd = useSharedClamd();

/** strace can follow a child here (installed, and ptrace allowed), or why not. */
function straceUnavailable(): string | false {
  const probe = spawnSync('strace', ['-f', '-qq', '-e', 'trace=none', 'true']);
  if (probe.error !== undefined) return 'strace is not installed';
  if (probe.status !== 0) return `strace cannot trace here: ${String(probe.stderr).trim()}`;
  return false;
}

/** Index of the first line from `from` on that matches, or -1. */
function find(lines: string[], pattern: RegExp, from = 0): number {
  for (let i = from; i < lines.length; i++) if (pattern.test(lines[i] ?? '')) return i;
  return -1;
}

/**
 * The first open (read-only) of `path` from `from` on, and the descriptor it gave: on its own
 * line, or, when strace -f split the call around another thread's (`<unfinished ...>`), on the
 * line where it resumed. Index -1 when there is none.
 */
function opened(lines: string[], path: string, from: number): { index: number; fd: string } {
  const quoted = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const index = find(
    lines,
    new RegExp(`openat\\(AT_FDCWD, "${quoted}", O_RDONLY.*(= \\d+|<unfinished \\.\\.\\.>)$`),
    from,
  );
  const line = lines[index] ?? '';
  const own = /= (\d+)$/.exec(line)?.[1];
  if (index < 0 || own !== undefined) return { index, fd: own ?? '' };
  const pid = /^(\d+)/.exec(line)?.[1];
  const resumed = find(
    lines,
    new RegExp(`^${pid} +<\\.\\.\\. openat resumed>.*= (\\d+)$`),
    index + 1,
  );
  return { index, fd: /= (\d+)$/.exec(lines[resumed] ?? '')?.[1] ?? '' };
}

/**
 * Where the sync of the file opened at `open` (with descriptor `fd`) completed: its own line, or
 * the line where the traced thread's call resumed.
 */
function syncCompleted(
  lines: string[],
  open: number,
  fd: string,
  call: 'fsync' | 'fdatasync',
): number {
  const start = find(lines, new RegExp(`^(\\d+) +${call}\\(${fd}[ )]`), open + 1);
  if (start < 0 || !(lines[start] ?? '').includes('<unfinished')) return start;
  const pid = /^(\d+)/.exec(lines[start] ?? '')?.[1];
  return find(lines, new RegExp(`^${pid} +<\\.\\.\\. ${call} resumed>.*= 0`), start + 1);
}

/** Uploads `size` bytes async to a service run under strace; the trace's lines and the item's id. */
async function tracedUpload(
  t: TestContext,
  env: Record<string, string>,
  size: number,
): Promise<{ lines: string[]; id: string; dataDir: string } | null> {
  const unavailable = straceUnavailable();
  if (unavailable) {
    t.skip(unavailable);
    return null;
  }
  const dataDir = tempDir();
  const traceDir = tempDir('assay-strace-');
  const log = join(traceDir, 'trace');
  t.after(() => {
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(traceDir, { recursive: true, force: true });
  });
  const serve = await startServe(
    t,
    {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: clamd.socket,
      ...env,
    },
    [
      'strace',
      '-f',
      '-qq',
      // Long enough for an item's id in its statement's parameters (PostgreSQL's Bind message).
      '-s',
      '200',
      '-e',
      'trace=rename,openat,fsync,fdatasync,write,writev',
      '-e',
      'signal=none',
      '-o',
      log,
    ],
  );
  const response = await fetch(`${serve.url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: basic('key', 'secret') },
    body: uploadForm(randomContent(size)),
  });
  assert.equal(response.status, 202);
  const { id } = (await response.json()) as { id: string };
  // SIGTERM to the group: strace and the service it runs stop together.
  signalGroup(serve.child, 'SIGTERM');
  await once(serve.child, 'exit');
  return { lines: readFileSync(log, 'utf8').split('\n'), id, dataDir };
}

/** The last line before `before` that matches, or -1. */
function findLast(lines: string[], pattern: RegExp, before: number): number {
  for (let i = before - 1; i >= 0; i--) if (pattern.test(lines[i] ?? '')) return i;
  return -1;
}

/** The job's commit (with what it holds) is durable before the 202, after line `after`. */
function assertCommitSyncedBefore202(
  lines: string[],
  dataDir: string,
  after: number,
  id: string,
): void {
  const answered = find(lines, /HTTP\/1\.1 202/);
  if (onPostgres) {
    // The first write that carries the item's id after `after` is its statement (the 202's body,
    // which names it too, comes later).
    const statement = find(lines, new RegExp(`^\\d+ +writev?\\(\\d+, .*${id}`), after);
    assert.ok(statement > after, 'the job goes to PostgreSQL after that');
    assert.ok(answered > statement, 'the 202 is written only after it');
    // PostgreSQL answers a statement once it is durably committed (synchronous_commit is on): at
    // once outside a transaction; inside one, only its commit is. Which is it, on that connection?
    const fd = /^\d+ +writev?\((\d+),/.exec(lines[statement] ?? '')?.[1] ?? '';
    const onConnection = (word: string) => new RegExp(`writev?\\(${fd}, .*\\b${word}\\b`, 'i');
    const begun = findLast(lines, onConnection('begin'), statement);
    if (begun > findLast(lines, onConnection('commit'), statement)) {
      const commit = find(lines, onConnection('commit'), statement);
      assert.ok(commit > statement && answered > commit, 'its transaction commits before the 202');
    }
    return;
  }
  const { index: openWal, fd: walFd } = opened(lines, `${dataDir}/assay.db-wal`, after);
  assert.ok(openWal > after, 'the WAL holding the job commit is opened after that');
  const walSynced = syncCompleted(lines, openWal, walFd, 'fdatasync');
  assert.ok(walSynced > openWal, 'and synced');
  assert.ok(answered > walSynced, 'the 202 is written only after the syncs completed');
}

describe('durability of the 202', () => {
  test('the spool directory and the job commit are synced to disk before the 202', async (t) => {
    // Over the inline size: the content goes through a spool file.
    const traced = await tracedUpload(t, { ASSAY_ASYNC_INLINE_BYTES: '0' }, 4096);
    if (traced === null) return;
    const { lines, id, dataDir } = traced;
    const spool = join(dataDir, 'spool');
    const renamed = find(lines, new RegExp(`rename\\("${spool}/${id}\\.part", "${spool}/${id}"`));
    assert.ok(renamed >= 0, 'the spool file is renamed into place');
    const { index: openDir, fd: dirFd } = opened(lines, spool, renamed);
    assert.ok(openDir > renamed, 'the spool directory is opened after the rename');
    const dirSynced = syncCompleted(lines, openDir, dirFd, 'fsync');
    assert.ok(dirSynced > openDir, 'and synced');
    assertCommitSyncedBefore202(lines, dataDir, dirSynced, id);
  });

  test('content within ASSAY_ASYNC_INLINE_BYTES is committed with its job, synced before the 202, and no spool file is made', async (t) => {
    const traced = await tracedUpload(t, {}, 4096);
    if (traced === null) return;
    const { lines, id, dataDir } = traced;
    assert.equal(
      find(lines, new RegExp(`${id}\\.part`)),
      -1,
      'no spool file is written for the item',
    );
    assertCommitSyncedBefore202(lines, dataDir, 0, id);
  });
});
