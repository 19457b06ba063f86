import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { randomContent } from '../helpers/content.js';
import { multipartFile, rawRequest, requestHead } from '../helpers/raw-http.js';
import { basic, buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const ANNOUNCED = 150 * 1024 * 1024;

function statusLines(answer: string): string[] {
  return [...answer.matchAll(/^HTTP\/1\.1 \d{3} [^\r]*/gm)].map((match) => match[0]);
}

/** A request head announcing `length` bytes and waiting for `100 Continue`: no body is sent. */
function expectingContinue(url: string, path: string, auth: string, length: number) {
  const form = multipartFile(Buffer.alloc(0));
  return rawRequest(
    url,
    requestHead('POST', path, {
      authorization: auth,
      'content-type': path.startsWith('/api/') ? 'application/octet-stream' : form.contentType,
      'content-length': length,
      expect: '100-continue',
    }),
  );
}

describe('Expect: 100-continue', () => {
  test('a wrong secret gets its 401 without 100 Continue, and the connection closes', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    for (const path of ['/v2.2/files', '/v2.2/files/async', '/api/scan/']) {
      const request = expectingContinue(svc.url, path, basic(svc.keyId, 'wrong'), ANNOUNCED);
      const { answer } = await request.closed;
      assert.deepEqual(statusLines(answer), ['HTTP/1.1 401 Unauthorized'], `${path}: ${answer}`);
      assert.equal(request.socket.bytesWritten, Buffer.byteLength(request.head), 'no body sent');
    }
  });

  test('a declared length over the limit gets 413 without 100 Continue', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    for (const path of ['/v2.2/files', '/v2.2/files/async', '/api/scan/']) {
      const request = expectingContinue(svc.url, path, svc.auth, ANNOUNCED);
      const { answer } = await request.closed;
      assert.deepEqual(
        statusLines(answer),
        ['HTTP/1.1 413 Payload Too Large'],
        `${path}: ${answer}`,
      );
    }
  });

  test('an acceptable upload gets 100 Continue, then its answer once the body is sent (sync, async, v1.0)', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const cases = [
      { path: '/v2.2/files', status: 'HTTP/1.1 201 Created', multipart: true },
      { path: '/v2.2/files/async', status: 'HTTP/1.1 202 Accepted', multipart: true },
      { path: '/api/scan/', status: 'HTTP/1.1 200 OK', multipart: false },
    ];
    for (const { path, status, multipart } of cases) {
      const form = multipartFile(randomContent(50_000));
      const body = multipart
        ? Buffer.concat([Buffer.from(form.before), form.content, Buffer.from(form.after)])
        : form.content;
      const request = rawRequest(
        svc.url,
        requestHead('POST', path, {
          authorization: svc.auth,
          'content-type': multipart ? form.contentType : 'application/octet-stream',
          'content-length': body.length,
          expect: '100-continue',
        }),
      );
      assert.deepEqual(statusLines(await request.answered()), ['HTTP/1.1 100 Continue'], path);
      request.send(body);
      request.socket.end();
      const { answer } = await request.closed;
      assert.deepEqual(
        statusLines(answer),
        ['HTTP/1.1 100 Continue', status],
        `${path}: ${answer}`,
      );
    }
  });
});

describe('a refusal before the body is read', () => {
  test('a small body is read and dropped and the connection kept, so a client still sending it gets the answer; a large one is not read', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const form = multipartFile(randomContent(48 * 1024));
    const head = (length: number) =>
      requestHead('POST', '/v2.2/files/async', {
        authorization: basic(svc.keyId, 'wrong'),
        'content-type': form.contentType,
        'content-length': length,
      });
    // The head alone: the 401 comes before any of the body; then the body, then another request
    // on the same connection. Closed with the body unread, the connection would be reset.
    const body = Buffer.concat([Buffer.from(form.before), form.content, Buffer.from(form.after)]);
    const small = rawRequest(svc.url, head(body.length));
    const refused = await small.answered();
    assert.deepEqual(statusLines(refused), ['HTTP/1.1 401 Unauthorized'], refused);
    assert.doesNotMatch(refused, /connection: close/i);
    small.send(body);
    small.send('GET /health/live HTTP/1.1\r\nHost: assay\r\nConnection: close\r\n\r\n');
    const { answer } = await small.closed;
    // The second answer follows the first's body on the same connection.
    assert.deepEqual(
      [...answer.matchAll(/HTTP\/1\.1 \d{3} [A-Za-z ]+/g)].map((match) => match[0]),
      ['HTTP/1.1 401 Unauthorized', 'HTTP/1.1 200 OK'],
    );

    // Past 64 KiB, the connection closes after the answer: nobody's megabytes are read for a 401.
    const large = rawRequest(svc.url, head(10 * 1024 * 1024));
    const { answer: closed } = await large.closed;
    assert.deepEqual(statusLines(closed), ['HTTP/1.1 401 Unauthorized'], closed);
    assert.match(closed, /connection: close/i);
  });

  test('after a refusal to come back later (429: the spool quota), a body of megabytes is read and dropped: the client still sending it gets the answer', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SPOOL_MAX_BYTES: String(1024 * 1024),
    });
    const form = multipartFile(randomContent(10 * 1024 * 1024));
    const body = Buffer.concat([Buffer.from(form.before), form.content, Buffer.from(form.after)]);
    const upload = rawRequest(
      svc.url,
      requestHead('POST', '/v2.2/files/async', {
        authorization: svc.auth,
        'content-type': form.contentType,
        'content-length': body.length,
      }),
    );
    const refused = await upload.answered();
    assert.deepEqual(statusLines(refused), ['HTTP/1.1 429 Too Many Requests'], refused);
    assert.match(refused, /retry-after: \d+/i);
    assert.doesNotMatch(refused, /connection: close/i);
    // Closed with megabytes unread, the connection would be reset under the client's writes.
    upload.send(body);
    upload.send('GET /health/live HTTP/1.1\r\nHost: assay\r\nConnection: close\r\n\r\n');
    const { answer } = await upload.closed;
    assert.deepEqual(
      [...answer.matchAll(/HTTP\/1\.1 \d{3} [A-Za-z ]+/g)].map((match) => match[0]),
      ['HTTP/1.1 429 Too Many Requests', 'HTTP/1.1 200 OK'],
    );
  });
});
