import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eicar } from '../../src/engines/test-content.js';
import { type LegacyFormat, legacyRequest, parseLegacy, UUID } from '../helpers/legacy.js';
import { startLocalServer } from '../helpers/local-server.js';
import { rawRequest, requestHead } from '../helpers/raw-http.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

/** The service's own error shape: exactly application/json, `{"error"}`, and its headers. */
async function assertServiceError(response: Response, status: number): Promise<string> {
  assert.equal(response.status, status);
  assert.equal(response.headers.get('content-type'), 'application/json');
  assert.match(response.headers.get('x-service-request-id') ?? '', UUID);
  assert.ok(response.headers.get('x-service-host-id'));
  assert.ok(response.headers.get('x-runtime'));
  assert.equal(response.headers.get('access-control-allow-origin'), '*');
  const body = (await response.json()) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body), ['error']);
  return String(body.error);
}

/** A raw HTTP answer: its status, headers (lower-cased names) and body. */
function parseAnswer(answer: string): {
  status: number;
  headers: Map<string, string>;
  body: string;
} {
  const end = answer.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = answer.slice(0, end).split('\r\n');
  const headers = new Map<string, string>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: answer.slice(end + 4) };
}

/** A v1.0 `oops` written on the socket: the format asked for and every service header. */
function assertRawLegacyOops(answer: string, status: number, format: LegacyFormat): string {
  const parsed = parseAnswer(answer);
  assert.equal(parsed.status, status, answer);
  assert.match(parsed.headers.get('x-service-request-id') ?? '', UUID);
  assert.ok(parsed.headers.get('x-service-host-id'));
  assert.match(parsed.headers.get('x-runtime') ?? '', /^\d+ms$/);
  assert.equal(parsed.headers.get('access-control-allow-origin'), '*');
  assert.equal(parsed.headers.get('connection'), 'close');
  const body = parseLegacy(format, parsed.body, parsed.headers.get('content-type') ?? null);
  assert.equal(body.status, 'oops');
  assert.equal(body.request_id, parsed.headers.get('x-service-request-id'));
  return body.reason ?? '';
}

describe("framework errors in the service's shape", () => {
  test('a URL the router cannot decode: v2 {"error"} with every header, the URL not echoed', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const response = await fetch(`${svc.url}/v2.2/files/%FF<script>`, {
      headers: { authorization: svc.auth },
    });
    const message = await assertServiceError(response, 400);
    assert.match(message, /URL is not valid/);
    assert.doesNotMatch(message, /%FF|script/);
  });

  test('v1.0: the requested format, and suppress_response_codes honoured', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const answer = await legacyRequest(`${svc.url}/api/scan/status/%FF`, {
      headers: { authorization: svc.auth },
      format: 'xml',
      query: 'suppress_response_codes=1',
    });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.body.status, 'oops');
    assert.match(answer.body.reason ?? '', /URL is not valid/);
    assert.equal(answer.body.request_id, answer.headers.get('x-service-request-id'));
    const plain = await legacyRequest(`${svc.url}/api/scan/status/%FF`, {
      headers: { authorization: svc.auth },
      format: 'yaml',
    });
    assert.equal(plain.status, 400);
    assert.equal(plain.body.status, 'oops');
  });

  test('a head too large (431) and bytes that are not HTTP (400): JSON with the headers', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const large = rawRequest(
      svc.url,
      requestHead('GET', '/v2.2/ping', { authorization: svc.auth, 'x-big': 'a'.repeat(20_000) }),
    );
    const { answer } = await large.closed;
    assert.match(answer, /^HTTP\/1\.1 431 /);
    assert.match(answer, /\r\ncontent-type: application\/json\r\n/);
    assert.match(answer, /\r\nx-service-request-id: [0-9a-f-]{36}\r\n/);
    assert.match(answer, /\r\naccess-control-allow-origin: \*\r\n/);
    assert.match(
      answer,
      /\r\n\r\n\{"error":"the request head \(its URL or headers\) is too large"\}$/,
    );

    const garbage = rawRequest(svc.url, 'NOT HTTP AT ALL\r\n\r\n');
    const bad = await garbage.closed;
    assert.match(bad.answer, /^HTTP\/1\.1 400 /);
    assert.match(bad.answer, /\r\nx-service-request-id: /);
    assert.match(bad.answer, /\{"error":"the request is not valid HTTP"\}$/);
    // The service goes on.
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200);
  });

  test('a 404 repeats at most 200 characters of an unknown path', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const path = `/v2.2/${'x'.repeat(5_000)}`;
    const response = await fetch(`${svc.url}${path}`, { headers: { authorization: svc.auth } });
    const message = await assertServiceError(response, 404);
    assert.ok(message.length < 260, `${message.length} characters`);
    assert.match(message, /^no resource at \/v2\.2\/x+…$/);
  });

  test('v1.0: a head too large (431), a segment too long (414), a request cut for its timeout (408): the requested format', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    const large = rawRequest(
      svc.url,
      requestHead('GET', '/api/scan/status/abc?format=xml', {
        authorization: svc.auth,
        'x-big': 'a'.repeat(20_000),
      }),
    );
    const tooLarge = assertRawLegacyOops((await large.closed).answer, 400, 'xml');
    assert.equal(tooLarge, 'the request head (its URL or headers) is too large');
    const suppressed = rawRequest(
      svc.url,
      requestHead('GET', '/api/scan/status/abc?format=yaml&suppress_response_codes=1', {
        authorization: svc.auth,
        'x-big': 'a'.repeat(20_000),
      }),
    );
    assertRawLegacyOops((await suppressed.closed).answer, 200, 'yaml');
    const longSegment = await legacyRequest(`${svc.url}/api/scan/status/${'a'.repeat(500)}`, {
      headers: { authorization: svc.auth },
      format: 'xml',
    });
    assert.equal(longSegment.status, 400, longSegment.text);
    assert.equal(longSegment.body.reason, 'a segment of the URL is too long');
    assert.match(longSegment.headers.get('x-service-request-id') ?? '', UUID);

    for (const [query, status, format] of [
      // 502: v1.0's retryable code (a slow link is worth another try).
      ['format=xml', 502, 'xml'],
      ['format=yaml&suppress_response_codes=1', 200, 'yaml'],
      ['', 502, 'json'],
    ] as const) {
      const slow = rawRequest(
        svc.url,
        requestHead('POST', `/api/scan/async?${query}`, {
          authorization: svc.auth,
          'content-length': 100,
        }),
      );
      slow.send('only part of it');
      const reason = assertRawLegacyOops((await slow.closed).answer, status, format);
      assert.equal(reason, 'request timeout: nothing received for 1 s', query);
    }
  });

  test('413 and a Content-Type that is no media type: the service error, on both versions', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const form = `location=${'a'.repeat(1024 * 1024)}`;
    const tooLarge = await fetch(`${svc.url}/v2.2/files/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
    });
    assert.equal(await assertServiceError(tooLarge, 413), 'a form may take at most 1048576 bytes');
    const legacyLarge = await legacyRequest(`${svc.url}/api/scan/fetch`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
      format: 'xml',
    });
    assert.equal(legacyLarge.status, 413);
    assert.equal(legacyLarge.body.reason, 'a form may take at most 1048576 bytes');

    const notAType = await fetch(`${svc.url}/v2.2/auth/tokens`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'nonsense' },
      body: 'timeout=60',
    });
    const message = await assertServiceError(notAType, 400);
    assert.equal(message, 'the Content-Type header is not a valid media type');
    const legacyNotAType = await legacyRequest(`${svc.url}/api/scan/`, {
      method: 'POST',
      headers: { authorization: svc.auth, 'content-type': 'nonsense' },
      body: eicar(),
      format: 'yaml',
    });
    assert.equal(legacyNotAType.status, 400);
    assert.equal(legacyNotAType.body.reason, 'the Content-Type header is not a valid media type');
  });

  test('no body is parsed or checked where no route reads one: a 404, a 405, a preflight', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const json = { 'content-type': 'application/json' };
    const unknown = await fetch(`${svc.url}/nothing`, { method: 'POST', headers: json, body: '{' });
    assert.equal(await assertServiceError(unknown, 404), 'no resource at /nothing');
    const notAType = await fetch(`${svc.url}/nothing`, {
      method: 'POST',
      headers: { 'content-type': 'nonsense' },
      body: 'x',
    });
    await assertServiceError(notAType, 404);
    // QUERY needs a Content-Type where a route takes it; no route does.
    const query = await fetch(`${svc.url}/v2.2/ping`, { method: 'QUERY' });
    assert.equal(
      await assertServiceError(query, 405),
      'method QUERY is not allowed here; use GET, HEAD',
    );
    const preflight = await fetch(`${svc.url}/v2.2/ping`, {
      method: 'OPTIONS',
      headers: json,
      body: '{',
    });
    assert.equal(preflight.status, 200);
    const legacy = await legacyRequest(`${svc.url}/api/scan/status/abc`, {
      method: 'POST',
      headers: { ...json, authorization: svc.auth },
      body: '{',
      format: 'xml',
    });
    assert.equal(legacy.status, 400, legacy.text);
    assert.equal(legacy.body.reason, 'method POST is not allowed here; use GET, HEAD');
  });

  test('an Expect other than 100-continue: 417 in the shape of each version', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const v2 = rawRequest(
      svc.url,
      requestHead('GET', '/v2.2/ping', { authorization: svc.auth, expect: 'something-else' }),
    );
    const answer = parseAnswer(await v2.answered());
    v2.socket.destroy();
    assert.equal(answer.status, 417);
    assert.equal(answer.headers.get('content-type'), 'application/json');
    assert.match(answer.headers.get('x-service-request-id') ?? '', UUID);
    assert.equal(answer.headers.get('access-control-allow-origin'), '*');
    assert.deepEqual(JSON.parse(answer.body), { error: 'Expect: only 100-continue is supported' });
    const legacy = rawRequest(
      svc.url,
      requestHead('GET', '/api/scan/status/abc?format=xml', {
        authorization: svc.auth,
        expect: 'something-else',
      }),
    );
    const legacyAnswer = parseAnswer(await legacy.answered());
    legacy.socket.destroy();
    assert.equal(legacyAnswer.status, 400);
    const body = parseLegacy(
      'xml',
      legacyAnswer.body,
      legacyAnswer.headers.get('content-type') ?? null,
    );
    assert.equal(body.reason, 'Expect: only 100-continue is supported');
  });

  test('a request arriving while the service shuts down: 503 in the shape of each version', async (t) => {
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const remote = await startLocalServer(async (_request, response) => {
      await released;
      response.end('slow content');
    });
    t.after(() => remote.close());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_FETCH_ALLOW: '127.0.0.1/32',
    });
    // A sync upload by `location` keeps a connection busy while the download waits; a request
    // pipelined behind it arrives once the shutdown has begun (one each: the 503 closes it).
    const boundary = 'assay-test-boundary';
    const form = `--${boundary}\r\nContent-Disposition: form-data; name="location"\r\n\r\n${remote.url}/slow\r\n--${boundary}--\r\n`;
    const busy = [0, 1].map(() =>
      rawRequest(
        svc.url,
        requestHead('POST', '/v2.2/files', {
          authorization: svc.auth,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': Buffer.byteLength(form),
        }) + form,
      ),
    );
    while (remote.requests.length < 2) await sleep(20);
    const stopped = svc.service.stop();
    busy[0]?.send(requestHead('GET', '/v2.2/ping', { authorization: svc.auth }));
    busy[1]?.send(
      requestHead('GET', '/api/scan/status/abc?format=xml', { authorization: svc.auth }),
    );
    await sleep(300);
    release();
    const [v2, legacy] = await Promise.all(
      busy.map(async (connection) => {
        const { answer } = await connection.closed;
        const answers = answer.split(/(?=HTTP\/1\.1 \d{3} )/).map(parseAnswer);
        assert.equal(answers.length, 2, answer);
        assert.equal(answers[0]?.status, 201, answer);
        return answers[1];
      }),
    );
    await stopped;
    assert.equal(v2?.status, 503);
    assert.equal(v2?.headers.get('retry-after'), '1');
    assert.match(v2?.headers.get('x-service-request-id') ?? '', UUID);
    assert.deepEqual(JSON.parse(v2?.body ?? ''), {
      error: 'the service is shutting down: retry shortly',
    });
    // v1.0's retryable code.
    assert.equal(legacy?.status, 502);
    const body = parseLegacy(
      'xml',
      legacy?.body ?? '',
      legacy?.headers.get('content-type') ?? null,
    );
    assert.equal(body.reason, 'the service is shutting down: retry shortly');
  });
});
