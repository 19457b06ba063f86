import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, type TestContext, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomContent, uploadForm } from '../helpers/content.js';
import { multipartFile, rawRequest, requestHead } from '../helpers/raw-http.js';
import { buildService, type TestService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** The head and the first bytes of a sync upload whose body is `total` bytes of content. */
function startUpload(svc: TestService, content: Buffer, path = '/v2.2/files') {
  const form = multipartFile(content);
  const request = rawRequest(
    svc.url,
    requestHead('POST', path, {
      authorization: svc.auth,
      'content-type': form.contentType,
      'content-length': form.length,
    }) + form.before,
  );
  return { request, form };
}

function locationForm(location: string): FormData {
  const form = new FormData();
  form.set('location', location);
  return form;
}

function statusOf(answer: string): number {
  return Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? 0);
}

function bodyOf(answer: string): Record<string, unknown> {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
}

describe('a client that sends too slowly', () => {
  test('sends part of a body, then nothing: 408 and the connection closed after the idle timeout', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    for (const path of ['/v2.2/files', '/v2.2/files/async', '/api/scan/']) {
      const started = performance.now();
      const content = randomContent(10_000);
      const { request } =
        path === '/api/scan/'
          ? {
              request: rawRequest(
                svc.url,
                requestHead('POST', path, {
                  authorization: svc.auth,
                  'content-length': content.length,
                }),
              ),
            }
          : startUpload(svc, content, path);
      request.send(content.subarray(0, 1000));
      const { answer, at } = await request.closed;
      const seconds = (at - started) / 1000;
      assert.ok(seconds >= 0.9 && seconds < 10, `${path}: closed after ${seconds} s`);
      // v1.0 answers `oops` in its own format, with its retryable code (502).
      const legacy = path === '/api/scan/';
      assert.equal(statusOf(answer), legacy ? 502 : 408, `${path}: ${answer}`);
      const body = bodyOf(answer);
      assert.match(String(legacy ? body.reason : body.error), /nothing received for 1 s/);
      assert.match(answer, /\r\nx-service-request-id: [0-9a-f-]{36}\r\n/);
      assert.match(answer, /\r\nx-runtime: \d+ms\r\n/);
    }
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200, 'the service keeps serving');
  });

  test('a client that trickles bytes without pause is cut at the whole-request timeout', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_REQUEST_TIMEOUT: '2',
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    const started = performance.now();
    const content = randomContent(10_000);
    const { request } = startUpload(svc, content);
    let sent = 0;
    const trickle = setInterval(() => request.send(content.subarray(sent, ++sent)), 100);
    t.after(() => clearInterval(trickle));
    const { answer, at } = await request.closed;
    clearInterval(trickle);
    const seconds = (at - started) / 1000;
    assert.ok(seconds >= 1.9 && seconds < 10, `closed after ${seconds} s`);
    assert.equal(statusOf(answer), 408, answer);
    assert.match(String(bodyOf(answer).error), /whole request took longer than 2 s/);
  });

  test('a slow clamd is not the client idling: reading paused and a late verdict are waited for', async (t) => {
    const slow = await slowClamd(t, clamd.socket, 2_500);
    const svc = await buildService(t, {
      ASSAY_CLAMD: slow.socket,
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    // 8 MB: enough to fill every buffer between the client and the stalled clamd, so the
    // service stops reading the upload for a while, then waits 2.5 s more for the verdict.
    const started = performance.now();
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(8 * 1024 * 1024)),
    });
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(response.status, 201, JSON.stringify(body));
    assert.deepEqual(body.findings, []);
    assert.ok(slow.stalls > 0, 'the upload was held up by clamd');
    assert.ok(performance.now() - started > 4_000, 'both delays were waited out');
  });
});

describe('synchronous scans at once (ASSAY_SYNC_CONCURRENCY)', () => {
  test('beyond the cap: 503 with Retry-After before the body is read; the scan in flight completes', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SYNC_CONCURRENCY: '1',
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    });
    const content = randomContent(100_000);
    const { request: slow, form } = startUpload(svc, content);
    slow.send(content.subarray(0, 1000));
    await sleep(300); // its handler has the slot once its head is in

    const refusals = [
      fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm('a second upload'),
      }),
      fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: locationForm(`${svc.url}/static/eicar.txt`),
      }),
    ];
    for (const refused of await Promise.all(refusals)) {
      const body = (await refused.json()) as Record<string, unknown>;
      assert.equal(refused.status, 503, JSON.stringify(body));
      assert.equal(refused.headers.get('retry-after'), '2');
      assert.match(String(body.error), /synchronous scans/);
    }
    const legacy = await fetch(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: 'a v1.0 scan',
    });
    assert.equal(legacy.status, 502, 'v1.0 says 502 for a service that cannot scan now');
    assert.equal(legacy.headers.get('retry-after'), '2');
    assert.match(((await legacy.json()) as { reason: string }).reason, /synchronous scans/);
    // Asynchronous submissions are not synchronous scans.
    const queued = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('queued instead'),
    });
    assert.equal(queued.status, 202);

    slow.send(Buffer.concat([content.subarray(1000), Buffer.from(form.after)]));
    const answer = await slow.answered();
    assert.equal(statusOf(answer), 201, answer);
    assert.deepEqual(bodyOf(answer).findings, []);
    slow.socket.destroy();

    // The slot is free again, whichever route takes it.
    const after = await fetch(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: 'after the slow one',
    });
    assert.equal(after.status, 200);
  });

  test("one account's slow uploads take at most its share (ASSAY_ACCOUNT_SYNC_CONCURRENCY); another account still scans", async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SYNC_CONCURRENCY: '4',
      ASSAY_ACCOUNT_SYNC_CONCURRENCY: '2',
    });
    const content = randomContent(50_000);
    const trickling = [startUpload(svc, content), startUpload(svc, content)];
    for (const { request } of trickling) request.send(content.subarray(0, 1000));
    await sleep(300);
    const third = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('a third upload of the same account'),
    });
    assert.equal(third.status, 503);
    assert.equal(third.headers.get('retry-after'), '2');
    assert.match(((await third.json()) as { error: string }).error, /this account/);
    const other = await svc.createAccountKey();
    for (let i = 0; i < 2; i++) {
      const answer = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: other.auth },
        body: uploadForm(`another account's upload ${i}`),
      });
      assert.equal(answer.status, 201, 'slots are left for other accounts');
      await answer.arrayBuffer();
    }
    for (const { request } of trickling) request.socket.destroy();
  });

  test('a client that disconnects mid-upload gives its slot back', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_SYNC_CONCURRENCY: '1' });
    for (let round = 0; round < 3; round++) {
      const content = randomContent(50_000);
      const { request } = startUpload(svc, content);
      request.send(content.subarray(0, 1000));
      await sleep(200);
      request.socket.destroy();
      await request.closed;
    }
    let status = 0;
    const deadline = Date.now() + 5_000;
    while (status !== 201 && Date.now() < deadline) {
      const response = await fetch(`${svc.url}/v2.2/files`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        body: uploadForm(randomContent(100)),
      });
      status = response.status;
      await response.arrayBuffer();
      if (status !== 201) await sleep(50);
    }
    assert.equal(status, 201);
  });
});

/**
 * A clamd that is deliberately slow, in front of the real one: after the first 256 KB of an
 * INSTREAM it stops reading for `delayMs`, and it holds every answer back for `delayMs`.
 */
async function slowClamd(t: TestContext, upstreamPath: string, delayMs: number) {
  const dir = tempDir('assay-slow-clamd-');
  const socketPath = join(dir, 'clamd.sock');
  const state = { stalls: 0 };
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(upstreamPath);
    sockets.add(client).add(upstream);
    let forwarded = 0;
    let stalled = false;
    client.on('data', (data) => {
      forwarded += data.length;
      upstream.write(data);
      if (!stalled && forwarded > 256 * 1024) {
        stalled = true;
        state.stalls += 1;
        client.pause();
        setTimeout(() => client.resume(), delayMs);
      }
    });
    client.on('end', () => upstream.end());
    upstream.on('data', (data) => {
      setTimeout(() => client.write(data), delayMs);
    });
    upstream.on('end', () => setTimeout(() => client.end(), delayMs));
    for (const socket of [client, upstream]) {
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return {
    socket: socketPath,
    get stalls() {
      return state.stalls;
    },
  };
}
