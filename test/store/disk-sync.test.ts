import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileDataSync, SharedDirectorySync } from '../../src/store/disk-sync.js';
import { tempDir } from '../helpers/service.js';

test('SharedDirectorySync: callers arriving while a sync runs share the next one; a failure reaches its callers', async (t) => {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const shared = new SharedDirectorySync(dir);
  const first = shared.sync();
  // Asked while the first runs: its entries may postdate it, so they wait for one sync after it.
  const later = Array.from({ length: 20 }, () => shared.sync());
  assert.equal(new Set(later).size, 1, 'the twenty share one sync');
  assert.notEqual(later[0], first, 'and it is not the one under way');
  await Promise.all([first, ...later]);
  // Nothing under way: a caller starts its own at once.
  const alone = shared.sync();
  assert.notEqual(alone, later[0]);
  await alone;

  const gone = new SharedDirectorySync(join(dir, 'missing'));
  await assert.rejects(gone.sync(), { code: 'ENOENT' });
  mkdirSync(join(dir, 'missing'));
  await gone.sync();
});

/** This process's descriptors open on `path`. */
function descriptorsOn(path: string): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false; // closed meanwhile (the readdir's own descriptor)
    }
  }).length;
}

test('FileDataSync: nothing to sync until the file exists; then one descriptor kept for every sync, shared by callers at once, closed with it', async (t) => {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'assay.db-wal');
  const walSync = new FileDataSync(path);
  await walSync.sync();
  assert.equal(descriptorsOn(path), 0);
  writeFileSync(path, 'frames');
  const first = walSync.sync();
  const later = Array.from({ length: 20 }, () => walSync.sync());
  assert.equal(new Set(later).size, 1, 'the twenty share one sync');
  assert.notEqual(later[0], first, 'and it is not the one under way');
  await Promise.all([first, ...later]);
  for (let i = 0; i < 5; i++) await walSync.sync();
  assert.equal(descriptorsOn(path), 1, 'one descriptor for all the syncs');
  await walSync.close();
  assert.equal(descriptorsOn(path), 0, 'closed');
  await assert.rejects(walSync.sync(), /closed/);
});
