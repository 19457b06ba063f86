import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pollResult } from '../helpers/client.js';
import { asBlob, randomContent, uploadForm } from '../helpers/content.js';
import { legacyRequest } from '../helpers/legacy.js';
import { multipartFile, rawRequest, requestHead } from '../helpers/raw-http.js';
import { buildService, type TestService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

const KB = 1000;
/** Quotas small enough to fill with a few uploads: 300 KB per account, 500 KB in all. */
// Through spool files (small content would be kept in its job): the quota counts both alike.
const QUOTAS = {
  ASSAY_ACCOUNT_SPOOL_MAX_BYTES: '300000',
  ASSAY_SPOOL_MAX_BYTES: '500000',
  ASSAY_ASYNC_INLINE_BYTES: '0',
};
/** No engine answers: accepted jobs wait, and their bytes stay held. */
const NO_ENGINE = { ASSAY_CLAMD: '/nonexistent/clamd.sock', ...QUOTAS };

async function submit(url: string, auth: string, size: number) {
  const response = await fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(randomContent(size)),
  });
  return { response, body: (await response.json()) as Record<string, unknown> };
}

/** Files in the spool: committed uploads and any partial one left behind. */
function spoolFiles(svc: TestService): string[] {
  return readdirSync(join(svc.dataDir, 'spool'));
}

/** Sends only the head of a multipart upload of `size` bytes; the answer comes without the body. */
async function headOnly(svc: TestService, auth: string, size: number): Promise<string> {
  const form = multipartFile(randomContent(size));
  const request = rawRequest(
    svc.url,
    requestHead('POST', '/v2.2/files/async', {
      authorization: auth,
      'content-type': form.contentType,
      'content-length': form.length,
    }),
  );
  const answer = await request.answered();
  request.socket.destroy();
  return answer;
}

describe('spool quota (ASSAY_SPOOL_MAX_BYTES, ASSAY_ACCOUNT_SPOOL_MAX_BYTES)', () => {
  test('past the account quota 429, past the total 507, both with Retry-After, before the body is sent', async (t) => {
    const svc = await buildService(t, NO_ENGINE);
    assert.equal((await submit(svc.url, svc.auth, 200 * KB)).response.status, 202);

    // The same account again: 400 KB would pass its 300 KB. The answer needs no byte of the body.
    const accountFull = await headOnly(svc, svc.auth, 200 * KB);
    assert.match(accountFull, /^HTTP\/1\.1 429 /);
    assert.match(accountFull, /\r\nretry-after: \d+\r\n/i);
    assert.match(accountFull, /"error":"this account may hold 300000 bytes/);

    // Another account has room of its own, until the service's 500 KB are held.
    const other = await svc.createAccountKey();
    assert.equal((await submit(svc.url, other.auth, 200 * KB)).response.status, 202);
    const third = await svc.createAccountKey();
    const full = await headOnly(svc, third.auth, 200 * KB);
    assert.match(full, /^HTTP\/1\.1 507 /);
    assert.match(full, /\r\nretry-after: \d+\r\n/i);
    // A small one still fits.
    assert.equal((await submit(svc.url, third.auth, 50 * KB)).response.status, 202);
    assert.equal(spoolFiles(svc).length, 3, 'nothing of the refused uploads was stored');
  });

  test('a body without a declared length is stopped when it passes the quota; its partial file is removed', async (t) => {
    const svc = await buildService(t, NO_ENGINE);
    const form = multipartFile(randomContent(400 * KB));
    const request = rawRequest(
      svc.url,
      requestHead('POST', '/v2.2/files/async', {
        authorization: svc.auth,
        'content-type': form.contentType,
        'transfer-encoding': 'chunked',
      }),
    );
    const chunk = (data: string | Buffer) =>
      `${Buffer.byteLength(data).toString(16)}\r\n${Buffer.isBuffer(data) ? data.toString('latin1') : data}\r\n`;
    request.send(chunk(form.before));
    for (
      let offset = 0;
      offset < form.content.length && !request.socket.destroyed;
      offset += 16 * KB
    ) {
      request.send(Buffer.from(chunk(form.content.subarray(offset, offset + 16 * KB)), 'latin1'));
    }
    if (!request.socket.destroyed) request.send(`${chunk(form.after)}0\r\n\r\n`);
    const answer = await request.answered();
    assert.match(answer, /^HTTP\/1\.1 429 /);
    assert.match(answer, /\r\nretry-after: \d+\r\n/i);
    request.socket.destroy();
    assert.deepEqual(spoolFiles(svc), [], 'no partial spool file is left');
    // The refused upload holds nothing: a 250 KB one fits.
    assert.equal((await submit(svc.url, svc.auth, 250 * KB)).response.status, 202);
  });

  test('bytes are held until the result: once it is recorded, the account may submit again', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ...QUOTAS });
    const first = await submit(svc.url, svc.auth, 250 * KB);
    assert.equal(first.response.status, 202);
    await pollResult(svc.url, svc.auth, String(first.body.id));
    assert.equal((await submit(svc.url, svc.auth, 250 * KB)).response.status, 202);
  });

  test('v1.0 async: 502 (retry later) past the account quota and past the total, with Retry-After', async (t) => {
    const svc = await buildService(t, NO_ENGINE);
    const post = (auth: string, size: number) =>
      legacyRequest(`${svc.url}/api/scan/async`, {
        method: 'POST',
        headers: { authorization: auth },
        body: asBlob(randomContent(size)),
      });
    assert.equal((await post(svc.auth, 200 * KB)).status, 200);
    const accountFull = await post(svc.auth, 200 * KB);
    assert.equal(accountFull.status, 502);
    assert.equal(accountFull.body.status, 'oops');
    assert.match(String(accountFull.body.reason), /this account may hold 300000 bytes/);
    assert.match(accountFull.headers.get('retry-after') ?? '', /^\d+$/);
    const other = await svc.createAccountKey();
    assert.equal((await post(other.auth, 250 * KB)).status, 200);
    const third = await svc.createAccountKey();
    const full = await post(third.auth, 200 * KB);
    assert.equal(full.status, 502);
    assert.equal(full.body.status, 'oops');
    assert.match(full.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(spoolFiles(svc).length, 2, 'nothing of the refused uploads was stored');
    // Stopped at once, while the refused body may still be read to its end: the connection is
    // closed once idle, not held for the keep-alive timeout (72 s, on PostgreSQL every time).
    const stopping = Date.now();
    await svc.service.stop();
    const stopMs = Date.now() - stopping;
    assert.ok(stopMs < 30_000, `the service took ${stopMs} ms to stop`);
  });
});
