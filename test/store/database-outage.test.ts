import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollResult, submitFetch, waitUntil } from '../helpers/client.js';
import { asBlob, randomContent, sha1, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { buildService, tempDir, useSharedClamd } from '../helpers/service.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { onPostgres, prepareStore } from '../helpers/test-database.js';

const clamd = useSharedClamd();

/** The service with its database reached through a relay the test can cut or tamper with. */
async function serviceBehindRelay(t: TestContext, env: Record<string, string> = {}) {
  const dataDir = tempDir();
  t.after(() => rmSync(dataDir, { recursive: true, force: true }));
  const database = new URL((await prepareStore(dataDir)).ASSAY_DATABASE_URL ?? '');
  const proxy = await startTcpProxy(database.hostname, Number(database.port));
  t.after(() => proxy.close());
  database.host = proxy.address;
  const svc = await buildService(t, {
    ASSAY_DATA_DIR: dataDir,
    ASSAY_DATABASE_URL: database.href,
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ...env,
  });
  return { svc, proxy };
}

describe('a database outage', { skip: onPostgres ? false : 'SQLite runs in the process' }, () => {
  test('requests get 503 with Retry-After, never 500 or a verdict; accepted work is finished after', async (t) => {
    // A download that takes a while: its job is running when the database goes away.
    const remote = await startLocalServer(async (_request, response) => {
      await sleep(1500);
      response.end('content that arrives during the outage');
    });
    t.after(() => remote.close());
    const { svc, proxy } = await serviceBehindRelay(t);
    const fetched = await submitFetch(svc.url, svc.auth, `${remote.url}/slow`);
    await remote.waitFor(1);

    proxy.cut();
    const attempts: Array<[string, () => Promise<Response>]> = [
      [
        'sync upload',
        () =>
          fetch(`${svc.url}/v2.2/files`, {
            method: 'POST',
            headers: { authorization: svc.auth },
            body: uploadForm(randomContent(1024)),
          }),
      ],
      [
        'async upload',
        () =>
          fetch(`${svc.url}/v2.2/files/async`, {
            method: 'POST',
            headers: { authorization: svc.auth },
            body: uploadForm(randomContent(1024)),
          }),
      ],
      [
        'result',
        () => fetch(`${svc.url}/v2.2/files/${fetched}`, { headers: { authorization: svc.auth } }),
      ],
      [
        'v1.0 scan',
        () =>
          fetch(`${svc.url}/api/scan/`, {
            method: 'POST',
            headers: { authorization: svc.auth },
            body: asBlob(randomContent(1024)),
          }),
      ],
    ];
    for (const [what, attempt] of attempts) {
      const response = await attempt();
      const body = await response.text();
      const expected = what === 'v1.0 scan' ? 502 : 503; // v1.0 has no 503 (see legacy-reply.ts)
      assert.equal(response.status, expected, `${what}: ${body}`);
      assert.ok(Number(response.headers.get('retry-after')) > 0, `${what} says when to retry`);
      assert.doesNotMatch(body, /findings|"clean"/, `${what} gives no verdict`);
    }
    const ready = await fetch(`${svc.url}/health/ready`);
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /store/);

    await sleep(2000); // the download ends while the database is away
    proxy.restore();
    await waitUntil(
      'ready again',
      async () => (await fetch(`${svc.url}/health/ready`)).status === 200,
      15_000,
    );
    const result = await pollResult(svc.url, svc.auth, fetched, 30_000);
    assert.deepEqual(result.findings, [], 'the job accepted before the outage is finished');
    const upload = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(1024)),
    });
    assert.equal(upload.status, 201);
  });
});

describe('a claim that loses its answer', {
  skip: onPostgres ? false : 'SQLite runs in the process',
}, () => {
  test('the job is put back at once, not left to its lease, and finishes once', async (t) => {
    const content = randomContent(2048);
    const remote = await startLocalServer((_request, response) => response.end(content));
    t.after(() => remote.close());
    const { svc, proxy } = await serviceBehindRelay(t, { ASSAY_JOB_LEASE: '60' });
    // The claim's conditional update (JobRepository.claim, one statement on PostgreSQL) reaches
    // PostgreSQL and commits; its answer is lost with the connection.
    const dropped = proxy.dropAnswerTo(/UPDATE jobs SET state = 'processing'/);
    const started = Date.now();
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/file.bin`);
    // A claim worded otherwise would never be seen: fail, not hang.
    await Promise.race([
      dropped,
      sleep(15_000, null, { ref: false }).then(() =>
        assert.fail('no claim statement reached the relay'),
      ),
    ]);
    const result = await pollResult(svc.url, svc.auth, id, 30_000);
    const tookMs = Date.now() - started;
    t.diagnostic(`result ${tookMs} ms after the submission (lease 60 s)`);
    assert.deepEqual(result.findings, []);
    assert.equal(result.checksum, sha1(content));
    assert.ok(tookMs < 20_000, `finished in ${tookMs} ms, well within the 60 s lease`);
    assert.equal(remote.requests.length, 1, 'downloaded once: the lost claim never ran');
  });
});
