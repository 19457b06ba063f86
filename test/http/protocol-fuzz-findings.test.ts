import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseAnswers } from '../../soak/fuzz-client.js';
import { isUnstorableText } from '../../src/domain/failures.js';
import { rawRequest, requestHead } from '../helpers/raw-http.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

/** What the protocol fuzz (npm run fuzz) found, each on its own. */
const clamd = useSharedClamd();

const answersOf = (text: string) => parseAnswers(Buffer.from(text, 'latin1'), 'POST', true).answers;

describe('protocol fuzz findings', () => {
  test('an HTTP/1.1 request without Host: 400 in the service shape, with its headers', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    for (const [path, shape] of [
      ['/v2.2/ping', /^\{"error":"an HTTP\/1\.1 request needs a Host header"\}$/],
      [
        '/api/scan/status/abc',
        /^\{"status":"oops","reason":"an HTTP\/1\.1 request needs a Host header"/,
      ],
    ] as const) {
      const head = `GET ${path} HTTP/1.1\r\nAuthorization: ${svc.auth}\r\nConnection: close\r\n\r\n`;
      const [answer] = answersOf((await rawRequest(svc.url, head).closed).answer);
      assert.equal(answer?.status, 400, path);
      assert.match(answer?.body.toString() ?? '', shape);
      assert.match(answer?.headers['x-service-request-id'] ?? '', /^[0-9a-f-]{36}$/);
    }
    // HTTP/1.0 never required it.
    const old = `GET /health/live HTTP/1.0\r\n\r\n`;
    assert.equal(answersOf((await rawRequest(svc.url, old).closed).answer)[0]?.status, 200);
  });

  test('a client that ends its side mid-body after a refusal gets one answer, not two', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    // 405 before the body is read; the small body is then drained, and never completes.
    const request = rawRequest(
      svc.url,
      `${requestHead('POST', '/v2.2/ping', { authorization: svc.auth, 'content-length': 100 })}abc`,
    );
    request.socket.end();
    const answers = answersOf((await request.closed).answer);
    assert.deepEqual(
      answers.map((a) => a.status),
      [405],
    );
  });

  test('a v1.0 request cut short by its client is answered in v1.0 format', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const request = rawRequest(
      svc.url,
      `${requestHead('POST', '/api/scan/async?format=xml', { authorization: svc.auth, 'content-length': 100 })}abc`,
    );
    request.socket.end();
    const [answer] = answersOf((await request.closed).answer);
    assert.equal(answer?.status, 400);
    assert.match(answer?.body.toString() ?? '', /^<\?xml [^>]+>\n<response><status>oops<\/status>/);
  });

  test('a v1.0 request in absolute form is answered as v1.0 outside the routes too', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    const answerTo = async (head: string, body = '') => {
      const request = rawRequest(svc.url, `${head}${body}`);
      return answersOf((await request.closed).answer)[0];
    };
    const get = (target: string) =>
      requestHead('GET', target, { authorization: svc.auth, connection: 'close' });
    const badUrl = await answerTo(get('http://assay.test/api/scan/%FF'));
    assert.equal(badUrl?.status, 400);
    assert.match(
      badUrl?.body.toString() ?? '',
      /^\{"status":"oops","reason":"the URL is not valid/,
    );
    const unknown = await answerTo(get('http://assay.test/api/scan/nothing'));
    assert.match(
      unknown?.body.toString() ?? '',
      /^\{"status":"oops","reason":"no such v1\.0 resource"/,
    );
    const head = requestHead('POST', 'http://assay.test/api/scan/?format=xml', {
      authorization: svc.auth,
      'content-length': 100,
    });
    const cut = await answerTo(head, 'part of it');
    assert.equal(cut?.status, 502);
    assert.match(cut?.body.toString() ?? '', /<status>oops<\/status><reason>request timeout/);
    // And v2.x's 405 is decided on the path alone, as the router routes it.
    const wrongMethod = await answerTo(
      requestHead('DELETE', 'http://assay.test/v2.2/files/async', {
        authorization: svc.auth,
        connection: 'close',
      }),
    );
    assert.equal(wrongMethod?.status, 405);
  });

  test("v1.0's 502 for a request cut for its timeout says when to retry", async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_REQUEST_IDLE_TIMEOUT: '1',
    });
    const slow = rawRequest(
      svc.url,
      requestHead('POST', '/api/scan/', { authorization: svc.auth, 'content-length': 100 }),
    );
    slow.send('part of it');
    const [answer] = answersOf((await slow.closed).answer);
    assert.equal(answer?.status, 502);
    assert.equal(answer?.headers['retry-after'], '1');
  });

  test('a NUL in an id or a key id: 404 and 401 on both stores (PostgreSQL: it was a 500)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const id = 'ab'.repeat(16);
    for (const [method, path] of [
      ['GET', `/v2.2/files/${id}%00`],
      ['GET', `/v2.2/files/${id}%00/trace`],
      ['GET', `/v2.1/auth/tokens/${id}%00`],
      ['DELETE', `/v2.0/auth/tokens/${id}%00`],
    ]) {
      const response = await fetch(`${svc.url}${path}`, {
        method,
        headers: { authorization: svc.auth },
      });
      assert.equal(response.status, 404, `${method} ${path}: ${await response.text()}`);
    }
    for (const user of [`${svc.keyId}\u0000`, `${id}\u0000`]) {
      for (const password of [svc.secret, '']) {
        const auth = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
        const response = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: auth } });
        assert.equal(response.status, 401, await response.text());
      }
    }
  });

  test('text PostgreSQL cannot store is told apart from a server failure', () => {
    const pgError = Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), {
      code: '22021',
    });
    assert.equal(isUnstorableText(pgError), true);
    assert.equal(isUnstorableText(new Error('wrapped', { cause: pgError })), true);
    assert.equal(isUnstorableText(Object.assign(new Error('x'), { code: '23505' })), false);
  });

  test('a NUL in a URL argument is a 400 on both stores (PostgreSQL cannot store it: it was a 500)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const form = { authorization: svc.auth, 'content-type': 'application/x-www-form-urlencoded' };
    for (const [path, body] of [
      ['/v2.2/files/fetch', 'location=http%3A%2F%2F127.0.0.1%3A9%2Fa%00b'],
      [
        '/v2.2/files/fetch',
        'location=http%3A%2F%2F127.0.0.1%3A9%2F&callback=https%3A%2F%2Fexample.com%2F%00',
      ],
      ['/api/scan/fetch', 'url=http%3A%2F%2F127.0.0.1%3A9%2Fa%00b'],
      [
        '/api/scan/fetch',
        'url=http%3A%2F%2F127.0.0.1%3A9%2F&post_callback=https%3A%2F%2Fexample.com%2F%01',
      ],
    ]) {
      const response = await fetch(`${svc.url}${path}`, { method: 'POST', headers: form, body });
      const text = await response.text();
      assert.equal(response.status, 400, `${path} ${body}: ${text}`);
      assert.match(text, /must not contain control characters/);
    }
    const upload = new FormData();
    upload.append('callback', 'https://example.com/\u0000');
    upload.append('file', new Blob(['clean']), 'a.txt');
    const sync = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: upload,
    });
    assert.equal(sync.status, 400, await sync.text());
  });
});
