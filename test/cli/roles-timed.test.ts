import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServe } from '../helpers/cli.js';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { dataDir, readyOf, remoteHolding, rolesEnv } from '../helpers/serve-roles.js';
import { basic, useSharedClamd } from '../helpers/service.js';
import { freshPostgresDatabase, onPostgres } from '../helpers/test-database.js';

// @run-alone: a killed worker taken over within lease + 5 s; a scan within 5 s

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');
/** Every process's settings: one clamd, fetches and callbacks on this machine. */
const common = rolesEnv(clamd);

describe('roles on one PostgreSQL database', {
  skip: onPostgres ? false : 'runs in the PostgreSQL pass (npm run test:postgres)',
}, () => {
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
});
