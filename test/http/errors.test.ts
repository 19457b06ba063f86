import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { uploadForm } from '../helpers/content.js';
import { failWrites } from '../helpers/failing-writes.js';
import { capturedLogger } from '../helpers/logs.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const env = () => ({ ASSAY_CLAMD: clamd.socket });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Every error is JSON `{"error": "<message>"}` with exactly `application/json`. */
async function assertError(response: Response, status: number) {
  assert.equal(response.status, status);
  assert.equal(response.headers.get('content-type'), 'application/json');
  const body = (await response.json()) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(typeof body.error, 'string');
  assert.ok(String(body.error).length > 5);
  return String(body.error);
}

/** Sends raw bytes, for bodies fetch would refuse to build (broken multipart). */
function rawRequest(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.on('data', (data) => {
      answer += data.toString('latin1');
    });
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe('bad input gets a clear error', () => {
  test('400 when there is no file part, or it is empty', async (t) => {
    const svc = await buildService(t, env());
    const onlyFields = new FormData();
    onlyFields.append('metadata[a]', 'b');
    const noFile = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: onlyFields,
    });
    assert.match(await assertError(noFile, 400), /file/);
    const empty = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(''),
    });
    assert.match(await assertError(empty, 400), /empty/);
  });

  test('400 for a non-multipart upload, whatever its type', async (t) => {
    const svc = await buildService(t, env());
    const bodies: Array<[Record<string, string>, string | undefined]> = [
      [{ 'content-type': 'application/json' }, '{"file":"x"}'],
      [{ 'content-type': 'application/octet-stream' }, 'raw bytes'],
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 'file=x'],
      [{ 'content-type': 'text/plain' }, 'hello'],
      [{}, undefined],
    ];
    for (const [headers, body] of bodies) {
      const response = await fetch(`${svc.url}/v2.1/files`, {
        method: 'POST',
        headers: { authorization: svc.auth, ...headers },
        body,
      });
      assert.match(await assertError(response, 400), /multipart/, JSON.stringify(headers));
    }
  });

  test('400 for malformed multipart bodies, and the service keeps serving', async (t) => {
    const svc = await buildService(t, env());
    const port = Number(new URL(svc.url).port);
    const broken = [
      // boundary never closed
      '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello',
      // garbage instead of part headers
      '--XYZ\r\nthis is not a header\r\n\r\nhello\r\n--XYZ--\r\n',
    ];
    for (const body of broken) {
      const answer = await rawRequest(
        port,
        `POST /v2.2/files HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\n` +
          `Content-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: ${body.length}\r\n` +
          `Connection: close\r\n\r\n${body}`,
      );
      assert.match(answer, /^HTTP\/1\.1 400 /, answer);
      assert.match(answer, /"error":/);
    }
    const missingBoundary = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'multipart/form-data' },
      body: 'x',
    });
    await assertError(missingBoundary, 400);
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200);
  });

  test('a body refused half read is drained: the connection serves the next request', async (t) => {
    const svc = await buildService(t, env());
    const fields = Array.from(
      { length: 200 },
      (_, i) => `--XYZ\r\nContent-Disposition: form-data; name="unused${i}"\r\n\r\nv\r\n`,
    ).join('');
    const tooMany = `${fields}--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello\r\n--XYZ--\r\n`;
    const good =
      '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello\r\n--XYZ--\r\n';
    const request = (body: string) =>
      `POST /v2.2/files HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\n` +
      `Content-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    // Both requests at once on one connection: the second is read only once the first's body is.
    const answer = await rawRequest(
      Number(new URL(svc.url).port),
      request(tooMany) + request(good),
    );
    const statuses = [...answer.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
    assert.deepEqual(statuses, ['413', '201'], answer);
    assert.match(answer, /"error":"at most 110 fields are allowed"/);
  });

  test('a client that half-closes its socket after the request still gets the result', async (t) => {
    const svc = await buildService(t, env());
    const body =
      '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello\r\n--XYZ--\r\n';
    const answer = await rawRequest(
      Number(new URL(svc.url).port),
      `POST /v2.2/files HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\n` +
        `Content-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    assert.match(answer, /^HTTP\/1\.1 201 /);
    assert.match(answer, /"findings":\[\]/);
  });

  test('400 for two file parts and for a callback that is not an http(s) URL', async (t) => {
    const svc = await buildService(t, env());
    const two = uploadForm('one');
    two.append('file', new Blob(['two']), 'b');
    const twoFiles = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: two,
    });
    await assertError(twoFiles, 400);
    const badCallback = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm('x', { callback: 'ftp://example.com/x' }),
    });
    assert.match(await assertError(badCallback, 400), /callback/);
  });
});

describe("server failures are not the client's", () => {
  test('a store write that fails during an upload is a logged 500, never a 400', async (t) => {
    const log = capturedLogger('info');
    const svc = await buildService(t, env(), log.logger);
    // A deliberately failing store: its error reads like SQLite's for a corrupt database, whose
    // words ("malformed") once made the error handler blame the client's multipart body.
    await failWrites(
      svc.store.db,
      (['files', 'jobs'] as const).map((table) => ({
        table,
        on: 'INSERT',
        message: 'database disk image is malformed',
      })),
    );
    const uploads: Array<[string, () => RequestInit]> = [
      ['/v2.2/files', () => ({ body: uploadForm('sync') })],
      ['/v2.2/files/async', () => ({ body: uploadForm('async') })],
      ['/api/scan/', () => ({ body: 'v1.0 sync' })],
      ['/api/scan/async', () => ({ body: 'v1.0 async' })],
    ];
    for (const [path, init] of uploads) {
      const response = await fetch(`${svc.url}${path}`, {
        method: 'POST',
        headers: { authorization: svc.auth },
        ...init(),
      });
      const text = await response.text();
      assert.equal(response.status, 500, `${path}: ${text}`);
      assert.doesNotMatch(text, /multipart|malformed/, 'no detail of the failure');
      const requestId = response.headers.get('x-service-request-id');
      const logged = log
        .records()
        .find((record) => record.reqId === requestId && Number(record.level) >= 50);
      assert.ok(logged, `${path}: the failure is logged at error level with the request id`);
      assert.match(JSON.stringify(logged.err), /database disk image is malformed/);
    }
    // A body that really is malformed is still the client's.
    const body = '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello';
    const answer = await rawRequest(
      Number(new URL(svc.url).port),
      `POST /v2.2/files HTTP/1.1\r\nHost: x\r\nAuthorization: ${svc.auth}\r\n` +
        `Content-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: ${body.length}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
    assert.match(answer, /^HTTP\/1\.1 400 /, answer);
    assert.match(answer, /"error":"malformed multipart body: /);
  });
});

describe('authentication', () => {
  test('401 with a Basic challenge for missing, malformed, wrong and unknown credentials', async (t) => {
    const svc = await buildService(t, env());
    const cases = [
      undefined,
      'Bearer abc',
      'Basic !!!',
      basic(svc.keyId, 'wrong secret'),
      basic('0123456789abcdef0123456789abcdef', svc.secret),
      basic(svc.keyId, ''),
    ];
    for (const authorization of cases) {
      const response = await fetch(`${svc.url}/v2.2/ping`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      await assertError(response, 401);
      assert.match(response.headers.get('www-authenticate') ?? '', /^Basic realm="/);
    }
  });

  test('401 before reading an upload without credentials', async (t) => {
    const svc = await buildService(t, env());
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      body: uploadForm('x'),
    });
    await assertError(response, 401);
  });

  test('ping answers pong with the key on every version', async (t) => {
    const svc = await buildService(t, env());
    for (const version of ['v2.0', 'v2.1', 'v2.2']) {
      const response = await fetch(`${svc.url}/${version}/ping`, {
        headers: { authorization: svc.auth },
      });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { message: 'pong', key: svc.keyId });
    }
  });

  test('bootstrap credentials are created at start and work as key/secret', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_BOOTSTRAP_CREDENTIALS: 'key:secret' });
    const response = await fetch(`${svc.url}/v2.2/ping`, {
      headers: { authorization: basic('key', 'secret') },
    });
    assert.deepEqual(await response.json(), { message: 'pong', key: 'key' });
  });
});

describe('routing errors and headers', () => {
  test('404 for unknown ids and paths, 405 for a wrong method', async (t) => {
    const svc = await buildService(t, env());
    const headers = { authorization: svc.auth };
    await assertError(
      await fetch(`${svc.url}/v2.2/files/0123456789abcdef0123456789abcdef`, { headers }),
      404,
    );
    await assertError(await fetch(`${svc.url}/v2.2/files/not-an-id`, { headers }), 404);
    const unknown = await assertError(await fetch(`${svc.url}/v2.2/nothing`, { headers }), 404);
    assert.doesNotMatch(unknown, /%s/);
    await assertError(await fetch(`${svc.url}/v9/files`, { headers }), 404);
    const wrong = await fetch(`${svc.url}/v2.2/files`, { method: 'PUT', headers });
    await assertError(wrong, 405);
    assert.equal(wrong.headers.get('allow'), 'POST');
    await assertError(await fetch(`${svc.url}/v2.2/ping`, { method: 'DELETE', headers }), 405);
    await assertError(
      await fetch(`${svc.url}/v2.2/files/0123456789abcdef0123456789abcdef`, {
        method: 'POST',
        headers,
      }),
      405,
    );
  });

  test('every response carries runtime, host id, request id and CORS headers', async (t) => {
    const svc = await buildService(t, { ...env(), ASSAY_HEADER_BRAND: 'Scanii' });
    const requests: Array<[string, RequestInit]> = [
      ['/v2.2/ping', { headers: { authorization: svc.auth } }],
      ['/v2.2/ping', {}],
      ['/v2.2/nothing', {}],
      ['/v2.2/files', { method: 'PUT' }],
      [
        '/v2.2/files',
        {
          method: 'OPTIONS',
          headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
        },
      ],
      ['/static/eicar.txt', {}],
      ['/health/live', {}],
    ];
    const requestIds = new Set<string>();
    for (const [path, init] of requests) {
      const response = await fetch(`${svc.url}${path}`, init);
      const h = response.headers;
      assert.match(h.get('x-runtime') ?? '', /^\d+ms$/, path);
      assert.match(h.get('x-scanii-host-id') ?? '', /^[0-9a-f]{8}$/, path);
      const requestId = h.get('x-scanii-request-id') ?? '';
      assert.match(requestId, UUID, path);
      requestIds.add(requestId);
      assert.equal(h.get('access-control-allow-origin'), '*', path);
      assert.match(h.get('access-control-allow-headers') ?? '', /Authorization/, path);
      assert.ok(h.get('date'), path);
      await response.arrayBuffer();
    }
    assert.equal(requestIds.size, requests.length);
  });

  test('OPTIONS preflight answers 200 without credentials', async (t) => {
    const svc = await buildService(t, env());
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('access-control-allow-methods') ?? '', /POST/);
    assert.match(response.headers.get('access-control-allow-headers') ?? '', /Content-Type/);
  });

  test('the default brand word is Service', async (t) => {
    const svc = await buildService(t, env());
    const response = await fetch(`${svc.url}/health/live`);
    assert.match(response.headers.get('x-service-request-id') ?? '', UUID);
    assert.ok(response.headers.get('x-service-host-id'));
  });

  test('static test content is served without credentials', async (t) => {
    const svc = await buildService(t, env());
    const eicarText = await fetch(`${svc.url}/static/eicar.txt`);
    assert.equal(eicarText.status, 200);
    assert.equal((await eicarText.text()).length, 68);
    for (const path of [
      '/static/samples/malware',
      '/static/samples/language.txt',
      '/static/samples/image.jpg',
    ]) {
      const response = await fetch(`${svc.url}${path}`);
      assert.equal(response.status, 200, path);
      assert.ok((await response.arrayBuffer()).byteLength > 0, path);
    }
  });
});
