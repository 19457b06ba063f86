import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollResult, submitFetch } from '../helpers/client.js';
import { randomContent, uploadForm } from '../helpers/content.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: fairness: another account's result within 5 s; a deadline in 6 s

const clamd = useSharedClamd();
// A stand-in for remote servers: /never accepts the request and never answers.
let remote: LocalServer;
before(async () => {
  remote = await startLocalServer((request, response) => {
    if (request.url.startsWith('/never')) return new Promise(() => {});
    response.end(randomContent(1024));
  });
});
after(() => remote.close());

/** How many requests the remote has received for paths starting with `prefix`. */
const requestsFor = (prefix: string) =>
  remote.requests.filter((request) => request.url.startsWith(prefix)).length;

describe('async work is shared fairly between accounts', () => {
  test("one account's fetches that never answer do not delay another account's upload", async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_JOB_CONCURRENCY: '4',
      ASSAY_ACCOUNT_FETCH_CONCURRENCY: '3',
      ASSAY_SHUTDOWN_GRACE: '0',
    });
    // Account A fills the queue with work that would hold every slot for the fetch deadline (300 s).
    for (let i = 0; i < 12; i++) await submitFetch(svc.url, svc.auth, `${remote.url}/never/${i}`);
    const b = await svc.createAccountKey();
    const started = Date.now();
    const response = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: b.auth },
      body: uploadForm(randomContent(64)),
    });
    assert.equal(response.status, 202);
    const { id } = (await response.json()) as { id: string };
    const result = await pollResult(svc.url, b.auth, id, 5_000);
    assert.deepEqual(result.findings, [], JSON.stringify(result));
    const elapsed = Date.now() - started;
    assert.ok(elapsed < 5_000, `B's result took ${elapsed} ms`);
    // A downloads as many at once as its cap, whatever it queued, and no more.
    const deadline = Date.now() + 5_000;
    while (requestsFor('/never/') < 3 && Date.now() < deadline) await sleep(20);
    await sleep(500);
    assert.equal(requestsFor('/never/'), 3, 'account A has 3 downloads in flight');
  });

  test('accounts take turns: with one slot, B is served between A’s jobs, not after all of them', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_FETCH_CONCURRENCY: '1',
      ASSAY_JOB_CONCURRENCY: '1',
      ASSAY_FETCH_TIMEOUT: '1',
    });
    // A's first download holds the only download slot for a second; meanwhile both queue more.
    await submitFetch(svc.url, svc.auth, `${remote.url}/never/a0`);
    await sleep(200);
    for (let i = 1; i <= 3; i++) await submitFetch(svc.url, svc.auth, `${remote.url}/never/a${i}`);
    const b = await svc.createAccountKey();
    const bId = await submitFetch(svc.url, b.auth, `${remote.url}/b`);
    await pollResult(svc.url, b.auth, bId, 10_000);
    // B came right after A's first job (each of A's ends at its 1 s deadline), not after all 4.
    assert.ok(
      requestsFor('/never/a') <= 2,
      `A's requests before B finished: ${requestsFor('/never/a')}`,
    );
  });
});

describe('ASSAY_FETCH_TIMEOUT', () => {
  test('bounds the download and the scan of a fetch: an error result naming the remote', async (t) => {
    // A clamd that takes the stream and never gives a verdict: only the deadline can end the job.
    const dir = await mkdtemp(join(tmpdir(), 'assay-silent-clamd-'));
    const socketPath = join(dir, 'clamd.sock');
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.resume();
    });
    await new Promise<void>((resolve) => silent.listen(socketPath, resolve));
    t.after(async () => {
      // Its connections end with it, as a stopped clamd's do: left open, they would hold this
      // file's process until the client's 30-s idle timeout.
      for (const socket of sockets) socket.destroy();
      silent.close();
      await rm(dir, { recursive: true, force: true });
    });
    const svc = await buildService(t, {
      ASSAY_CLAMD: socketPath,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
      ASSAY_FETCH_TIMEOUT: '2',
    });
    const started = Date.now();
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/content`);
    const result = await pollResult(svc.url, svc.auth, id, 10_000);
    const elapsed = Date.now() - started;
    assert.equal('findings' in result, false, JSON.stringify(result));
    assert.match(String(result.error), new RegExp(`${remote.url}/content took longer than 2 s`));
    assert.ok(elapsed < 6_000, `ended after ${elapsed} ms`);
  });
});
