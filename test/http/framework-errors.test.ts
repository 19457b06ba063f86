import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { legacyRequest, UUID } from '../helpers/legacy.js';
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
});
