import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { assayCli, startServe } from '../helpers/cli.js';
import { MOTO_ENV, until, useMoto } from '../helpers/moto.js';
import { tempDir, useSharedClamd } from '../helpers/service.js';
import { storeEnv } from '../helpers/test-database.js';

// A full listing of a watched bucket (`assay admin bucket scan`) by a real `assay serve`, killed
// midway: the next start resumes from the checkpoint.

const OBJECTS = 300;
const BACKLOG = 16;
const clamd = useSharedClamd();
const moto = useMoto();

describe('bucket listings', () => {
  test(`a listing of ${OBJECTS} objects resumes after a SIGKILL midway (in serve --processes 2) and ends with one result and one tag per object`, async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const bucket = await moto.bucket('bulk');
    const keys = Array.from(
      { length: OBJECTS },
      (_, i) => `objects/${String(i).padStart(4, '0')}.txt`,
    );
    for (let i = 0; i < OBJECTS; i += 25) {
      await Promise.all(
        keys.slice(i, i + 25).map((key) => moto.put(bucket.name, key, `The object ${key}.`)),
      );
    }
    const env = {
      ...MOTO_ENV,
      ASSAY_DATA_DIR: dataDir,
      ASSAY_CLAMD: clamd.socket,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      // A listing (and the jobs) of a process that died resume once their lease ends.
      ASSAY_JOB_LEASE: '2',
      ASSAY_BUCKET_BACKLOG: String(BACKLOG),
    };
    const first = await startServe(t, env);
    const cli = (...args: string[]) => {
      const run = assayCli(dataDir, args);
      assert.equal(run.status, 0, run.stderr);
      return run.stdout;
    };
    cli('admin', 'bucket', 'add', 'bulk', '--bucket', bucket.name, '--key', 'key');
    cli(
      'admin',
      'bucket',
      'update',
      'bulk',
      '--endpoint',
      moto.endpoint,
      '--credentials',
      'env:MOTO',
    );
    cli('admin', 'bucket', 'scan', 'bulk');

    const store = await openStore(loadConfig({ ASSAY_DATA_DIR: dataDir, ...storeEnv(dataDir) }));
    t.after(() => store.close());
    const listing = async () => (await store.bucketSources.findByName('bulk'))?.listing;
    await until('a third of the bucket listed', async () =>
      ((await listing())?.count ?? 0) >= OBJECTS / 3 ? true : null,
    );
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    const cut = await listing();
    assert.equal(cut?.state, 'running', 'killed midway');
    assert.ok((cut?.count ?? 0) < OBJECTS, `${cut?.count} listed when it was killed`);

    // The second life is two processes on one port (`--processes 2`): one of them lists.
    const second = await startServe(t, env, [], ['--processes', '2']);
    const source = await store.bucketSources.findByName('bulk');
    const sourceId = source?.id ?? '';
    const counts = await until(
      'every object scanned and tagged',
      async () => {
        const byStatus = await store.bucketObjects.countsByStatus(sourceId);
        const done =
          (await listing())?.state === 'idle' &&
          byStatus.NO_THREATS_FOUND === OBJECTS &&
          (await store.bucketObjects.writesDue(sourceId)) === 0;
        return done ? byStatus : null;
      },
      240_000,
    );
    assert.deepEqual(counts, { NO_THREATS_FOUND: OBJECTS });
    const resumed = second.records.find((record) => record.msg === 'listing a watched bucket');
    assert.equal(typeof resumed?.after, 'string', 'the second life resumed from the checkpoint');

    // One verdict tag per object, in the bucket itself.
    for (const key of keys) {
      const tags = await moto.tags(bucket.name, key);
      assert.deepEqual(Object.keys(tags ?? {}).sort(), ['AssayScanStatus', 'AssayScanTime'], key);
      assert.equal(tags?.AssayScanStatus, 'NO_THREATS_FOUND', key);
    }
    // One result per object, but for the scans in flight when the process died (scanned again).
    const results = new Map<string, number>();
    const rows = await store.db
      .selectFrom('files')
      .select('metadata')
      .where('api_key_id', '=', 'key')
      .execute();
    for (const row of rows) {
      const key = (JSON.parse(row.metadata) as Record<string, string>).bucket_key ?? '';
      results.set(key, (results.get(key) ?? 0) + 1);
    }
    assert.deepEqual([...results.keys()].sort(), keys);
    const again = [...results.values()].filter((count) => count > 1).length;
    assert.ok(
      again <= 2 * BACKLOG,
      `${again} objects scanned twice (at most the backlog in flight)`,
    );
    t.diagnostic(`${again} objects were in flight at the kill and scanned again`);
  });
});
