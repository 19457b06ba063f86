import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { asBlob, sha1 } from '../helpers/content.js';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { MB, streamUpload } from '../helpers/stream-upload.js';

// @run-alone: 100 MB uploads through the service and clamd (reset under heavy load)

const clamd = useSharedClamd();

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
});
