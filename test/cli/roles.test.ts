import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { assayCli, type ServeProcess, startServe } from '../helpers/cli.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { startS3Server } from '../helpers/s3-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

// @run-alone: a killed worker taken over within lease + 5 s; a scan within 5 s

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');

interface Ready {
  status: string;
  problems: string[];
  queue?: { due: number; running: number; oldestDueSeconds: number } | null;
}

async function readyOf(serve: ServeProcess): Promise<{ status: number; body: Ready }> {
  const response = await fetch(`${serve.url}/health/ready`);
  return { status: response.status, body: (await response.json()) as Ready };
}

/** A data dir for the test, removed after it. */
function dataDir(t: TestContext): string {
  const dir = tempDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A remote whose first `held` requests get no answer until the test ends; later ones `content`. */
async function remoteHolding(t: TestContext, held: number, content: Buffer) {
  const open: ServerResponse[] = [];
  const remote = await startLocalServer((_request, response) => {
    if (remote.requests.length <= held) {
      open.push(response);
      return;
    }
    response.end(content);
  });
  t.after(() => {
    for (const response of open) response.destroy();
    return remote.close();
  });
  return remote;
}

/** Every process's settings: one clamd, fetches and callbacks on this machine. */
const common = () => ({
  ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_CALLBACK_RETRY_BASE_MS: '100',
});

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

    const workerReady = await readyOf(worker);
    assert.equal(workerReady.status, 200);
    assert.deepEqual(workerReady.body.queue, { due: 0, running: 0, oldestDueSeconds: 0 });
    // A worker serves nothing but its health: the API is the api processes'.
    const notServed = await fetch(`${worker.url}/v2.2/files/${id}`, {
      headers: { authorization: AUTH },
    });
    assert.equal(notServed.status, 404);
    assert.equal(typeof ((await notServed.json()) as { error?: unknown }).error, 'string');
  });

  test('a worker killed with SIGKILL mid-job: another finishes it within the lease, one result, one delivery id', async (t) => {
    const database = await freshPostgresDatabase();
    const content = randomContent(3000);
    // The first download (the doomed worker's) never gets an answer.
    const remote = await remoteHolding(t, 1, content);
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const LEASE_SECONDS = 2;
    const env = {
      ...common(),
      ASSAY_DATABASE_URL: database,
      ASSAY_JOB_LEASE: String(LEASE_SECONDS),
    };
    const api = await startServe(t, { ...env, ASSAY_DATA_DIR: dataDir(t), ASSAY_ROLE: 'api' });
    const doomed = await startServe(t, {
      ...env,
      ASSAY_DATA_DIR: dataDir(t),
      ASSAY_ROLE: 'worker',
    });

    const submitted = await fetch(`${api.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        location: `${remote.url}/file.bin`,
        callback: `${receiver.url}/hook`,
      }).toString(),
    });
    assert.equal(submitted.status, 202);
    const { id } = (await submitted.json()) as { id: string };
    await remote.waitFor(1, 10_000);
    assert.equal((await readyOf(doomed)).body.queue?.running, 1, 'the worker reports its job');

    const survivor = await startServe(t, {
      ...env,
      ASSAY_DATA_DIR: dataDir(t),
      ASSAY_ROLE: 'worker',
    });
    // Let the doomed worker renew its lease once more: the survivor must wait the lease out.
    await sleep(1000);
    doomed.child.kill('SIGKILL');
    await once(doomed.child, 'exit');
    const killedAt = Date.now();
    const result = await pollResult(api.url, AUTH, id, 30_000);
    const tookMs = Date.now() - killedAt;
    t.diagnostic(`finished ${tookMs} ms after the kill (lease ${LEASE_SECONDS} s)`);
    assert.equal(result.checksum, sha1(content));
    // The documented bound: ASSAY_JOB_LEASE plus the claim poll (1 s), with margin for the download.
    assert.ok(tookMs < (LEASE_SECONDS + 1) * 1000 + 4000, `finished ${tookMs} ms after the kill`);
    assert.equal(remote.requests.length, 2, 'downloaded once more, by the survivor');

    await receiver.waitFor(1, 15_000);
    await sleep(1000); // a second result would bring a second delivery by now
    const deliveries = new Set(receiver.requests.map((r) => r.headers['x-assay-delivery']));
    assert.equal(deliveries.size, 1, 'one result, so one delivery (ids repeat only on retries)');
    for (const request of receiver.requests) {
      assert.equal((JSON.parse(request.body.toString()) as { id: string }).id, id);
    }
    const ready = await readyOf(survivor);
    assert.deepEqual(ready.body.queue, { due: 0, running: 0, oldestDueSeconds: 0 }, 'no job lost');
  });
});

describe('roles on one SQLite data dir', {
  skip: onPostgres ? 'the PostgreSQL pass runs roles in the tests above' : false,
}, () => {
  test("async uploads to an api process are done by a worker sharing its data dir; the worker's readiness reports its queue", async (t) => {
    const dir = dataDir(t);
    const fetched = randomContent(100);
    const remote = await remoteHolding(t, 1, fetched);
    const api = await startServe(t, { ...common(), ASSAY_DATA_DIR: dir, ASSAY_ROLE: 'api' });
    const worker = await startServe(t, {
      ...common(),
      ASSAY_DATA_DIR: dir,
      ASSAY_ROLE: 'worker',
      ASSAY_FETCH_CONCURRENCY: '1',
    });
    // One download slot, held by a download that never ends: the next fetch is due and waits.
    await submitFetch(api.url, AUTH, `${remote.url}/held`);
    await remote.waitFor(1, 10_000);
    const waiting = await submitFetch(api.url, AUTH, `${remote.url}/waiting`);
    await sleep(1500);
    const ready = await readyOf(worker);
    assert.equal(ready.status, 200);
    assert.equal(ready.body.queue?.due, 1);
    assert.equal(ready.body.queue?.running, 1);
    assert.ok((ready.body.queue?.oldestDueSeconds ?? -1) >= 1, JSON.stringify(ready.body));
    assert.equal((await readyOf(api)).body.queue, undefined);

    // An upload to the api process: the worker, told nothing, finds it within its second's look.
    const content = randomContent(2048);
    const uploaded = await fetch(`${api.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: uploadForm(content),
    });
    assert.equal(uploaded.status, 202);
    const { id } = (await uploaded.json()) as { id: string };
    const started = Date.now();
    const result = await pollResult(api.url, AUTH, id, 20_000);
    assert.equal(result.checksum, sha1(content));
    assert.ok(Date.now() - started < 5_000, `scanned ${Date.now() - started} ms after the 202`);

    // A second worker takes the waiting fetch.
    await startServe(t, { ...common(), ASSAY_DATA_DIR: dir, ASSAY_ROLE: 'worker' });
    assert.equal((await pollResult(api.url, AUTH, waiting, 20_000)).checksum, sha1(fetched));
    await waitUntil(
      'the queue is empty',
      async () => (await readyOf(worker)).body.queue?.due === 0,
    );
    assert.equal((await fetch(`${worker.url}/v2.2/ping`)).status, 404, 'a worker has no API');
  });

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
