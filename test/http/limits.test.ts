import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildService, useSharedClamd } from '../helpers/service.js';
import { MB, streamUpload } from '../helpers/stream-upload.js';

const clamd = useSharedClamd();

describe('the upload size limit', () => {
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
