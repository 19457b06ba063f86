import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pollResult, waitUntil } from '../helpers/client.js';
import { asBlob, randomContent, uploadForm } from '../helpers/content.js';
import { startS3Server } from '../helpers/s3-server.js';
import { buildService, tempDir, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

describe('spool backends', () => {
  test('ASSAY_SPOOL_URL: async content goes through the bucket and is removed once scanned', async (t) => {
    const s3 = await startS3Server();
    t.after(() => s3.stop());
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SPOOL_URL: `s3://${s3.bucket}/assay/spool`,
      ASSAY_S3_ENDPOINT: s3.endpoint,
      // Small content would be kept in its job (ASSAY_ASYNC_INLINE_BYTES): through the bucket here.
      ASSAY_ASYNC_INLINE_BYTES: '0',
    });
    const content = randomContent(64 * 1024);
    const v2 = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(content),
    });
    assert.equal(v2.status, 202);
    const { id } = (await v2.json()) as { id: string };
    const v1 = await fetch(`${svc.url}/api/scan/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: asBlob(content),
    });
    assert.equal(v1.status, 200);
    assert.ok(s3.storedBytes() >= 2 * content.length, 'both contents were stored in the bucket');
    const result = await pollResult(svc.url, svc.auth, id);
    assert.deepEqual(result.findings, []);
    assert.equal(result.content_length, content.length);
    const deadline = Date.now() + 10_000;
    while ((await s3.keys()).length > 0) {
      assert.ok(Date.now() < deadline, `left in the bucket: ${(await s3.keys()).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const local = join(svc.dataDir, 'spool');
    assert.ok(!existsSync(local) || readdirSync(local).length === 0, 'nothing in the data dir');
  });

  test('ASSAY_SPOOL_DIR: async content waits in the shared directory, not the data dir', async (t) => {
    const shared = tempDir('assay-shared-spool-');
    t.after(() => rmSync(shared, { recursive: true, force: true }));
    const svc = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_SPOOL_DIR: shared,
      ASSAY_ASYNC_INLINE_BYTES: '0',
    });
    const response = await fetch(`${svc.url}/v2.2/files/async`, {
      method: 'POST',
      headers: { authorization: svc.auth },
      body: uploadForm(randomContent(4096)),
    });
    assert.equal(response.status, 202);
    const { id } = (await response.json()) as { id: string };
    assert.deepEqual((await pollResult(svc.url, svc.auth, id)).findings, []);
    assert.ok(!existsSync(join(svc.dataDir, 'spool')), 'the data dir has no spool');
    // The file goes right after the result is recorded.
    await waitUntil(
      'the shared spool is emptied once scanned',
      () => readdirSync(shared).length === 0,
      2_000,
    );
  });
});
