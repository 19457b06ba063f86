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
