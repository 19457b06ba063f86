import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assayCli, startServe } from '../helpers/cli.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { startS3Server } from '../helpers/s3-server.js';
import { dataDir, readyOf, rolesEnv } from '../helpers/serve-roles.js';
import { basic, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');
/** Every process's settings: one clamd, fetches and callbacks on this machine. */
const common = rolesEnv(clamd);

describe('roles on one PostgreSQL database', {
  skip: onPostgres ? false : 'runs in the PostgreSQL pass (npm run test:postgres)',
}, () => {
  test('async uploads to an api process are scanned by a worker on another data dir, through the S3 spool', async (t) => {
    const s3 = await startS3Server();
    t.after(() => s3.stop());
    const env = {
      ...common(),
      ASSAY_DATABASE_URL: await freshPostgresDatabase(),
      ASSAY_SPOOL_URL: `s3://${s3.bucket}/spool`,
      ASSAY_S3_ENDPOINT: s3.endpoint,
    };
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'api' });
    const worker = await startServe(t, {
      ...env,
      ASSAY_DATA_DIR: dataDir(t),
      ASSAY_ROLE: 'worker',
    });
    const contents = [randomContent(5000), randomContent(70_000)];
    const ids: string[] = [];
    for (const content of contents) {
      const response = await fetch(`${api.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: AUTH },
        body: uploadForm(content),
      });
      assert.equal(response.status, 202);
      ids.push(((await response.json()) as { id: string }).id);
    }
    for (const [index, id] of ids.entries()) {
      const result = await pollResult(api.url, AUTH, id, 30_000);
      assert.deepEqual(result.findings, []);
      assert.equal(result.checksum, sha1(contents[index] as Buffer), 'the content the api took');
    }
    await waitUntil('the bucket emptied', async () => (await s3.keys()).length === 0, 10_000);
    assert.equal((await readyOf(worker)).body.queue?.due, 0);
  });

  test('a fetch submitted to an api process is done by a worker process, never by the api alone', async (t) => {
    const database = await freshPostgresDatabase();
    const content = randomContent(3000);
    const remote = await startLocalServer((_request, response) => response.end(content));
    t.after(() => remote.close());
    const env = { ...common(), ASSAY_DATABASE_URL: database };
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'api' });
    const id = await submitFetch(api.url, AUTH, `${remote.url}/file.bin`);
    await sleep(2000);
    const pending = await fetch(`${api.url}/v2.2/files/${id}`, {
      headers: { authorization: AUTH },
    });
    assert.equal(pending.status, 404, 'an api process alone runs no job');
    assert.equal(remote.requests.length, 0, 'nothing was fetched');
    const apiReady = await readyOf(api);
    assert.equal(apiReady.status, 200);
    assert.equal(apiReady.body.queue, undefined, 'an api process reports no queue of its own');

    const worker = await startServe(
      t,
      { ...env, ASSAY_DATA_DIR: dataDir(t) },
      [],
      ['--role', 'worker'],
    );
    const result = await pollResult(api.url, AUTH, id, 20_000);
    assert.equal(result.checksum, sha1(content));
    assert.deepEqual(result.findings, []);
    assert.equal(remote.requests.length, 1);

    // The result is readable once committed; the worker counts its job done just after.
    let workerReady = await readyOf(worker);
    await waitUntil('the worker to count its job done', async () => {
      workerReady = await readyOf(worker);
      return (workerReady.body.queue as { running?: number } | undefined)?.running === 0;
    }).catch(() => undefined);
    assert.equal(workerReady.status, 200);
    assert.deepEqual(workerReady.body.queue, { due: 0, running: 0, oldestDueSeconds: 0 });
    // A worker serves nothing but its health: the API is the api processes'.
    const notServed = await fetch(`${worker.url}/v2.2/files/${id}`, {
      headers: { authorization: AUTH },
    });
    assert.equal(notServed.status, 404);
    assert.equal(typeof ((await notServed.json()) as { error?: unknown }).error, 'string');
  });
});

describe('roles on one SQLite data dir', {
  skip: onPostgres ? 'the PostgreSQL pass runs roles in the tests above' : false,
}, () => {
  test('a bad role or process count is refused with a clear error', (t) => {
    const dir = dataDir(t);
    const role = assayCli(dir, ['serve', '--role', 'both']);
    assert.equal(role.status, 1);
    assert.match(role.stderr, /ASSAY_ROLE must be one of api, worker, all, got "both"/);
    const processes = assayCli(dir, ['serve', '--processes', '0']);
    assert.equal(processes.status, 1);
    assert.match(processes.stderr, /ASSAY_PROCESSES must be between 1 and 256, got 0/);
  });
});
