import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { asBlob, sha1 } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// @run-alone: 100 MB uploads through the service and clamd (reset under heavy load)

const clamd = useSharedClamd();

const MB = 1024 * 1024;
const BOUNDARY = 'assay-test-boundary';
const HEAD = Buffer.from(
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
    'Content-Type: application/octet-stream\r\n\r\n',
);
const TAIL = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);

interface Answer {
  status: number;
  body: string;
  /** Bytes of the upload written before the answer arrived. */
  written: number;
}

/**
 * Streams a multipart upload of `size` bytes in 1 MiB chunks, with or without Content-Length, and
 * stops writing as soon as the answer arrives (an over-limit upload is answered early).
 */
function streamUpload(url: string, auth: string, size: number, chunked: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const total = HEAD.length + size + TAIL.length;
    const headers: Record<string, string | number> = {
      authorization: auth,
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
    };
    if (!chunked) headers['content-length'] = total;
    const req = request(`${url}/v2.2/files`, { method: 'POST', headers });
    let written = 0;
    let answered = false;
    req.on('response', (response) => {
      answered = true;
      let body = '';
      response.on('data', (chunk: Buffer) => {
        body += chunk.toString();
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, written }));
    });
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    const chunk = randomBytes(MB);
    const pump = () => {
      while (!answered && written < size) {
        const n = Math.min(MB, size - written);
        written += n;
        // A fresh tail byte per chunk keeps the content unique (clamd caches clean hashes).
        chunk[0] = written & 0xff;
        if (!req.write(n === MB ? chunk : chunk.subarray(0, n)))
          return void req.once('drain', pump);
      }
      if (!answered) req.end(TAIL);
    };
    req.write(HEAD);
    pump();
  });
}

describe('the upload size limit', () => {
  test('exactly the limit (100 MB) is accepted and scanned', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    const content = randomBytes(100 * MB);
    const form = new FormData();
    form.append('file', asBlob(content), 'big.bin');
    const response = await fetch(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: form,
    });
    assert.equal(response.status, 201);
    const body = (await response.json()) as Record<string, unknown>;
    assert.equal(body.content_length, 100 * MB);
    assert.equal(body.checksum, sha1(content));
    assert.deepEqual(body.findings, []);
  });

  test('one byte more is refused with 413, streamed with or without Content-Length', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
    for (const chunked of [false, true]) {
      const answer = await streamUpload(svc.url, svc.auth, 100 * MB + 1, chunked);
      assert.equal(answer.status, 413, `chunked=${chunked}`);
      assert.match(JSON.parse(answer.body).error, /limit/);
    }
    const ping = await fetch(`${svc.url}/v2.2/ping`, { headers: { authorization: svc.auth } });
    assert.equal(ping.status, 200);
  });

  test('a declared Content-Length far over the limit is refused before the body is read', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_MAX_FILE_SIZE: String(MB),
    });
    const answer = await streamUpload(svc.url, svc.auth, 500 * MB, false);
    assert.equal(answer.status, 413);
    assert.ok(answer.written < 50 * MB, `the service read ${answer.written} bytes before refusing`);
  });

  test('the limit is a setting', async (t) => {
    const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket, ASSAY_MAX_FILE_SIZE: '1000' });
    const over = await streamUpload(svc.url, svc.auth, 1001, true);
    assert.equal(over.status, 413);
    const at = await streamUpload(svc.url, svc.auth, 1000, true);
    assert.equal(at.status, 201);
    assert.equal(JSON.parse(at.body).content_length, 1000);
  });
});
