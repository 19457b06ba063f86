import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ServeProcess, startServe } from '../helpers/cli.js';
import { pollResult, submitFetch, traceOf, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { cannotMountTmpfs, inMountNamespaceOf, ON_TMPFS, remount } from '../helpers/mounts.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const AUTH = basic('key', 'secret');
const SPOOL_WAIT = /^the spool is not answering \(writing: EROFS\); waiting: /;

async function readyOf(serve: ServeProcess) {
  const response = await fetch(`${serve.url}/health/ready`);
  return { status: response.status, text: await response.text() };
}

const unavailable = cannotMountTmpfs();

test('a shared spool remounted read-only: the api answers 503, api and worker are not ready, a fetch waits without using attempts; read-write again, all resumes', {
  skip: unavailable ?? false,
}, async (t) => {
  const dataDir = tempDir();
  const spoolDir = tempDir('assay-ro-spool-');
  t.after(() => {
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(spoolDir, { recursive: true, force: true });
  });
  const content = randomContent(2048);
  const remote = await startLocalServer((_request, response) => response.end(content));
  t.after(() => remote.close());
  const settings = {
    ASSAY_DATA_DIR: dataDir,
    ASSAY_SPOOL_DIR: spoolDir,
    ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
    ASSAY_CLAMD: clamd.socket,
    ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    ASSAY_ENGINE_RETRY_MS: '200',
    // One attempt: an outage that used it would end the job as an error result.
    ASSAY_JOB_MAX_ATTEMPTS: '1',
    // Small content would be kept in its job (ASSAY_ASYNC_INLINE_BYTES): through the spool here.
    ASSAY_ASYNC_INLINE_BYTES: '0',
  };
  // The spool on a tmpfs in a mount namespace of its own, which the worker joins: both share it.
  const api = await startServe(t, { ...settings, ASSAY_ROLE: 'api' }, [
    'unshare',
    '-m',
    'sh',
    '-c',
    ON_TMPFS,
    spoolDir,
  ]);
  const worker = await startServe(
    t,
    { ...settings, ASSAY_ROLE: 'worker' },
    inMountNamespaceOf(api.child.pid),
  );
  assert.equal((await readyOf(api)).status, 200);
  assert.equal((await readyOf(worker)).status, 200);

  remount(api.child.pid, spoolDir, 'ro');
  const refused = await fetch(`${api.url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: AUTH },
    body: uploadForm(randomContent(1024)),
  });
  const refusal = await refused.text();
  assert.equal(refused.status, 503, refusal);
  assert.ok(Number(refused.headers.get('retry-after')) > 0);
  for (const serve of [api, worker]) {
    // A check's outcome answers readiness for a second: the worker's was taken just before.
    let ready = await readyOf(serve);
    await waitUntil('not ready', async () => {
      ready = await readyOf(serve);
      return ready.status === 503;
    });
    assert.match(ready.text, /"spool: not answering \(EROFS\)"/);
    assert.ok(!ready.text.includes(spoolDir), ready.text);
  }
  // Accepted by the api (only its job is stored); the worker cannot write its download: it waits.
  const id = await submitFetch(api.url, AUTH, `${remote.url}/file`);
  await waitUntil(
    'the fetch waits for the spool',
    async () => (await traceOf(api.url, AUTH, id)).some((line) => SPOOL_WAIT.test(line)),
    20_000,
  );
  await sleep(1000); // about five tries
  const pending = await fetch(`${api.url}/v2.2/files/${id}`, { headers: { authorization: AUTH } });
  assert.equal(pending.status, 404, 'still waiting');
  await pending.arrayBuffer();

  remount(api.child.pid, spoolDir, 'rw');
  for (const serve of [api, worker]) {
    await waitUntil('ready again', async () => (await readyOf(serve)).status === 200, 10_000);
  }
  const result = await pollResult(api.url, AUTH, id, 20_000);
  assert.deepEqual(result.findings, []);
  assert.equal(result.checksum, sha1(content));
  const trace = await traceOf(api.url, AUTH, id);
  assert.equal(trace.filter((line) => SPOOL_WAIT.test(line)).length, 1, trace.join('\n'));
  assert.ok(!trace.some((line) => /attempt \d+ of/.test(line)), trace.join('\n'));
  for (const told of [refusal, JSON.stringify(result), ...trace]) {
    assert.ok(!told.includes(spoolDir), told);
  }
  const uploaded = await fetch(`${api.url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: AUTH },
    body: uploadForm(content),
  });
  assert.equal(uploaded.status, 202);
  const upload = (await uploaded.json()) as { id: string };
  assert.equal((await pollResult(api.url, AUTH, upload.id, 20_000)).checksum, sha1(content));
  // The operators' logs name the spool the clients were not told of.
  assert.ok(
    worker.records.some((record) => JSON.stringify(record).includes(spoolDir)),
    'the worker logs the path',
  );
});
