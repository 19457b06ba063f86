import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pollResult, submitFetch, traceOf } from '../helpers/client.js';
import { randomContent } from '../helpers/content.js';
import { type LocalServer, startLocalServer } from '../helpers/local-server.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
/** The remote's pause: far past the idle timeout the tests set (1 s). */
const PAUSE_MS = 5_000;
/** A pause shorter than the idle timeout (1 s) but longer than the clamd session's (test hook). */
const SHORT_PAUSE_MS = 700;
const CLAMD_IDLE_MS = 300;
const CONTENT = randomContent(20);
// Remote servers that misbehave: /pause sends 10 of 20 declared bytes, pauses, then the rest (the
// audit's server, with a longer pause than the tests' idle timeout; /short-pause with a shorter one); /silent never answers the request; /steady sends a byte
// every 200 ms, which is slow but never silent for long.
let remote: LocalServer;
before(async () => {
  remote = await startLocalServer(async (request, response) => {
    if (request.url.startsWith('/silent')) return new Promise(() => {});
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '20' });
    if (request.url.startsWith('/pause') || request.url.startsWith('/short-pause')) {
      response.write(CONTENT.subarray(0, 10));
      await sleep(request.url.startsWith('/pause') ? PAUSE_MS : SHORT_PAUSE_MS);
      return void response.end(CONTENT.subarray(10));
    }
    for (let i = 0; i < CONTENT.length - 1; i++) {
      response.write(CONTENT.subarray(i, i + 1));
      await sleep(200);
    }
    response.end(CONTENT.subarray(CONTENT.length - 1));
  });
});
after(() => remote.close());

/** Small timeouts, so a stall shows in a second; quick retries, so a retried download would show. */
const settings = () => ({
  ASSAY_CLAMD: clamd.socket,
  ASSAY_FETCH_ALLOW: '127.0.0.1/32',
  ASSAY_FETCH_IDLE_TIMEOUT: '1',
  ASSAY_ENGINE_RETRY_MS: '100',
});

const requestsFor = (prefix: string) =>
  remote.requests.filter((request) => request.url.startsWith(prefix)).length;

function fetchSync(url: string, auth: string, location: string): Promise<Response> {
  const form = new FormData();
  form.append('location', location);
  return fetch(`${url}/v2.2/files`, {
    method: 'POST',
    headers: { authorization: auth },
    body: form,
  });
}

const spoolFiles = (dataDir: string) => readdir(join(dataDir, 'spool'));

describe('a remote server that stalls mid-body', () => {
  test('an async fetch ends at once with an error naming the remote, downloaded once', async (t) => {
    const svc = await buildService(t, settings());
    const location = `${remote.url}/pause/async`;
    const started = Date.now();
    const id = await submitFetch(svc.url, svc.auth, location);
    const result = await pollResult(svc.url, svc.auth, id, 15_000);
    const elapsed = Date.now() - started;
    assert.equal('findings' in result, false, JSON.stringify(result));
    assert.match(
      String(result.error),
      new RegExp(`the remote server ${location} stalled: nothing received for 1 s after 10 bytes`),
    );
    assert.doesNotMatch(String(result.error), /engine/);
    // The idle timeout (1 s) ended it, not the end of the pause (5 s) nor a retry.
    assert.ok(elapsed < PAUSE_MS - 1_000, `ended after ${elapsed} ms`);
    await sleep(1_000); // a retry (every 100 ms) would have asked the remote again by now
    assert.equal(requestsFor('/pause/async'), 1, 'the remote was asked once');
    const trace = await traceOf(svc.url, svc.auth, id);
    assert.ok(
      trace.some((line) => /^failed: the remote server .* stalled/.test(line)),
      trace.join('\n'),
    );
    assert.ok(!trace.some((line) => /attempt|waiting/.test(line)), trace.join('\n'));
    assert.deepEqual(await spoolFiles(svc.dataDir), [], 'the partial download was removed');
  });

  test('a remote that never answers the request ends the same way', async (t) => {
    const svc = await buildService(t, settings());
    const location = `${remote.url}/silent/async`;
    const id = await submitFetch(svc.url, svc.auth, location);
    const result = await pollResult(svc.url, svc.auth, id, 10_000);
    assert.match(
      String(result.error),
      new RegExp(`the remote server ${location} stalled: .* waiting for the response head`),
    );
    await sleep(1_000);
    assert.equal(requestsFor('/silent/async'), 1);
  });

  test('the v2.2 synchronous location form answers 502 naming the remote, not 503', async (t) => {
    const svc = await buildService(t, settings());
    const location = `${remote.url}/pause/sync`;
    const started = Date.now();
    const response = await fetchSync(svc.url, svc.auth, location);
    const elapsed = Date.now() - started;
    const body = (await response.json()) as { error: string };
    assert.equal(response.status, 502, JSON.stringify(body));
    assert.equal(response.headers.get('retry-after'), null);
    assert.match(body.error, new RegExp(`the remote server ${location} stalled`));
    assert.ok(elapsed < PAUSE_MS - 1_000, `answered after ${elapsed} ms`);
    assert.equal(requestsFor('/pause/sync'), 1);
    assert.deepEqual(await spoolFiles(svc.dataDir), []);
  });

  test('a slow but steady remote is downloaded and scanned, async and sync', async (t) => {
    const svc = await buildService(t, settings());
    // 20 bytes over 4 s: four times the idle timeout in all, never silent for 1 s.
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/steady/async`);
    const response = await fetchSync(svc.url, svc.auth, `${remote.url}/steady/sync`);
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(response.status, 201, JSON.stringify(body));
    assert.deepEqual(body.findings, []);
    assert.equal(body.content_length, 20);
    const result = await pollResult(svc.url, svc.auth, id, 15_000);
    assert.deepEqual(result.findings, [], JSON.stringify(result));
    assert.equal(result.content_length, 20);
    const trace = await traceOf(svc.url, svc.auth, id);
    assert.ok(
      trace.includes(`downloaded: 20 bytes from ${remote.url}/steady/async`),
      trace.join('\n'),
    );
    // An async fetch's download is removed once its result is recorded, as an upload's is.
    for (const deadline = Date.now() + 2_000; Date.now() < deadline; ) {
      if ((await spoolFiles(svc.dataDir)).length === 0) break;
      await sleep(20);
    }
    assert.deepEqual(await spoolFiles(svc.dataDir), [], 'the download was removed after the scan');
  });

  test('a pause longer than the clamd session allows does not reach clamd: the content is scanned', async (t) => {
    // The clamd session gives up after 0.3 s without bytes; the remote pauses 0.7 s mid-body.
    // Streamed into clamd, that was an engine failure (and retried); spooled first, it is not.
    const svc = await buildService(t, settings(), undefined, {
      clamdIdleTimeoutMs: CLAMD_IDLE_MS,
    });
    const id = await submitFetch(svc.url, svc.auth, `${remote.url}/short-pause/async`);
    const response = await fetchSync(svc.url, svc.auth, `${remote.url}/short-pause/sync`);
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(response.status, 201, JSON.stringify(body));
    assert.deepEqual(body.findings, []);
    const result = await pollResult(svc.url, svc.auth, id, 15_000);
    assert.deepEqual(result.findings, [], JSON.stringify(result));
    assert.equal(requestsFor('/short-pause/async'), 1);
  });
});
