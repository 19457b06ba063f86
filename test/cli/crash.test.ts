import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/open-store.js';
import { startServe } from '../helpers/cli.js';
import { pollResult } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { failWrites } from '../helpers/failing-writes.js';
import { startLocalServer } from '../helpers/local-server.js';
import { basic, tempDir, useSharedClamd } from '../helpers/service.js';
import { prepareStore } from '../helpers/test-database.js';

const clamd = useSharedClamd();

const AUTH = basic('key', 'secret');
const JOBS = 100;

describe('crash safety', () => {
  test('SIGKILL with 100 async jobs pending: all complete after restart, every callback arrives', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const common = {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_ENGINE_RETRY_MS: '200',
      ASSAY_CALLBACK_RETRY_BASE_MS: '100',
      // Jobs claimed when the process died resume when their lease ends.
      ASSAY_JOB_LEASE: '2',
    };

    // First life: no engine to be had, so every accepted job is still pending when it dies.
    const first = await startServe(t, { ...common, ASSAY_CLAMD: '/nonexistent/clamd.sock' });
    const submitted = new Map<string, string>();
    for (let i = 0; i < JOBS; i++) {
      const content = randomContent(2048);
      const response = await fetch(`${first.url}/v2.2/files/async`, {
        method: 'POST',
        headers: { authorization: AUTH },
        body: uploadForm(content, {
          callback: `${receiver.url}/hook/${i}`,
          'metadata[n]': String(i),
        }),
      });
      assert.equal(response.status, 202);
      const { id } = (await response.json()) as { id: string };
      submitted.set(id, sha1(content));
    }
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');
    assert.equal(receiver.requests.length, 0, 'nothing was finished before the crash');

    // Second life, with the engine: the jobs resume from the data dir.
    const second = await startServe(t, { ...common, ASSAY_CLAMD: clamd.socket });
    const deadline = Date.now() + 60_000;
    const done = new Map<string, Record<string, unknown>>();
    while (done.size < JOBS && Date.now() < deadline) {
      for (const id of submitted.keys()) {
        if (done.has(id)) continue;
        const response = await fetch(`${second.url}/v2.2/files/${id}`, {
          headers: { authorization: AUTH },
        });
        if (response.status === 200)
          done.set(id, (await response.json()) as Record<string, unknown>);
        else await response.arrayBuffer();
      }
      if (done.size < JOBS) await sleep(200);
    }
    assert.equal(done.size, JOBS, `${done.size} of ${JOBS} jobs completed after the restart`);
    for (const [id, result] of done) {
      assert.equal(result.checksum, submitted.get(id));
      assert.deepEqual(result.findings, []);
    }
    await receiver.waitFor(JOBS, 30_000);
    const delivered = new Set(
      receiver.requests.map((r) => (JSON.parse(r.body.toString()) as { id: string }).id),
    );
    assert.deepEqual(
      [...delivered].sort(),
      [...submitted.keys()].sort(),
      'a callback for every job',
    );
    second.child.kill('SIGTERM');
    const [code] = await once(second.child, 'exit');
    assert.equal(code, 0);
  });
});

describe('jobs that end the process, and a store that refuses writes', () => {
  test('a job during which the process dies, every time: it stops after its attempts with an error result', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    // Each attempt of the job fetches this URL; the test kills the process when it does, as a
    // job that crashes the process would.
    const remote = await startLocalServer(() => new Promise(() => {}));
    t.after(() => remote.close());
    const common = {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_JOB_MAX_ATTEMPTS: '2',
      ASSAY_JOB_LEASE: '1',
    };
    let serve = await startServe(t, common);
    const response = await fetch(`${serve.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: AUTH, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ location: `${remote.url}/crash` }).toString(),
    });
    const { id } = (await response.json()) as { id: string };
    for (let attempt = 1; attempt <= 2; attempt++) {
      // (waitFor resolves after the handler answers, which this one never does.)
      const deadline = Date.now() + 10_000;
      while (remote.requests.length < attempt) {
        assert.ok(Date.now() < deadline, `attempt ${attempt} did not fetch`);
        await sleep(20);
      }
      serve.child.kill('SIGKILL');
      await once(serve.child, 'exit');
      serve = await startServe(t, common);
    }
    const result = await pollResult(serve.url, AUTH, id, 20_000);
    assert.equal('findings' in result, false, JSON.stringify(result));
    assert.match(
      String(result.error),
      /^gave up after 2 attempts; the last ended without an outcome/,
    );
    await sleep(1_500);
    assert.equal(remote.requests.length, 2, 'no third attempt');
    const trace = (await (
      await fetch(`${serve.url}/v2.2/files/${id}/trace`, { headers: { authorization: AUTH } })
    ).json()) as { events: Array<{ message: string }> };
    assert.match(trace.events.at(-1)?.message ?? '', /^failed: gave up after 2 attempts/);
    serve.child.kill('SIGTERM');
    await once(serve.child, 'exit');
  });

  test('store writes failing in the job runner: the process keeps running, the job is finished later', async (t) => {
    const dataDir = tempDir();
    t.after(() => rmSync(dataDir, { recursive: true, force: true }));
    const serve = await startServe(t, {
      ASSAY_DATA_DIR: dataDir,
      ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret',
      ASSAY_CLAMD: clamd.socket,
      ASSAY_ENGINE_RETRY_MS: '100',
    });
    const store = await openStore(
      loadConfig({ ASSAY_DATA_DIR: dataDir, ...(await prepareStore(dataDir)) }),
    );
    t.after(() => store.close());
    // The result, every trace line but the submission's, and putting the job back all fail: the
    // job runner's recording and then its error handling (a full disk does this).
    const failure = await failWrites(store.db, [
      { table: 'files', on: 'INSERT' },
      { table: 'trace_events', on: 'INSERT', when: "NEW.message NOT LIKE 'received%'" },
      { table: 'jobs', on: 'UPDATE', when: "NEW.state = 'pending'" },
    ]);
    const content = randomContent(4096);
    const response = await fetch(`${serve.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: AUTH },
      body: uploadForm(content),
    });
    assert.equal(response.status, 202);
    const { id } = (await response.json()) as { id: string };
    const deadline = Date.now() + 10_000;
    while (!serve.messages.some((m) => /could not release a job yet/.test(m))) {
      assert.ok(Date.now() < deadline, serve.messages.join(' | '));
      assert.equal(serve.child.exitCode, null, 'the process is running');
      await sleep(50);
    }
    const ping = await fetch(`${serve.url}/v2.2/ping`, { headers: { authorization: AUTH } });
    assert.equal(ping.status, 200, 'the service answers while its store refuses writes');
    await failure.heal();
    const result = await pollResult(serve.url, AUTH, id, 20_000);
    assert.equal(result.checksum, sha1(content));
    assert.deepEqual(result.findings, []);
    assert.equal(serve.child.exitCode, null, 'the process is still running');
    serve.child.kill('SIGTERM');
    const [code] = await once(serve.child, 'exit');
    assert.equal(code, 0);
  });
});
