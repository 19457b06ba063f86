import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { eicar } from '../../src/engines/test-content.js';
import { pollResult, waitUntil } from '../helpers/client.js';
import { randomContent, sha1, uploadForm } from '../helpers/content.js';
import { buildService, spoolOf, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();

async function submit(url: string, auth: string, content: Buffer): Promise<Response> {
  return fetch(`${url}/v2.2/files/async`, {
    method: 'POST',
    headers: { authorization: auth },
    body: uploadForm(content),
  });
}

describe('small async uploads kept in their job (ASSAY_ASYNC_INLINE_BYTES)', () => {
  test('up to the inline size no spool file is made, one byte over one is; both are scanned whole', async (t) => {
    // No engine answers at first: the accepted jobs wait, so what each holds can be looked at.
    const svc = await buildService(t, {
      ASSAY_CLAMD: '/nonexistent/clamd.sock',
      ASSAY_ASYNC_INLINE_BYTES: '1000',
      ASSAY_ENGINE_RETRY_MS: '100',
    });
    const within = Buffer.concat([Buffer.from(eicar()), randomContent(1000 - eicar().length)]);
    const over = randomContent(1001);
    const ids: string[] = [];
    for (const content of [within, over]) {
      const response = await submit(svc.url, svc.auth, content);
      assert.equal(response.status, 202);
      ids.push(((await response.json()) as { id: string }).id);
    }
    const [inlineId, spooledId] = ids as [string, string];
    assert.deepEqual(spoolOf(svc.dataDir), [spooledId], 'only the larger upload is in the spool');
    const held = await svc.store.jobs.findForAccount(svc.accountId, inlineId);
    assert.ok(held?.content?.equals(within), 'the smaller is held in its job, whole');
    assert.equal(held?.spoolKey, null);
    assert.equal(held?.size, 1000, 'and counted in the spool quota by its size');
    await svc.service.stop();

    // The same data dir with an engine: both are scanned from where they are kept.
    const scanning = await buildService(t, {
      ASSAY_CLAMD: clamd.socket,
      ASSAY_ASYNC_INLINE_BYTES: '1000',
      ASSAY_DATA_DIR: svc.dataDir,
    });
    const flagged = await pollResult(scanning.url, svc.auth, inlineId, 20_000);
    assert.deepEqual(flagged.findings, ['content.malicious.eicar-test-signature']);
    assert.equal(flagged.checksum, sha1(within));
    assert.equal(flagged.content_length, 1000);
    const clean = await pollResult(scanning.url, svc.auth, spooledId, 20_000);
    assert.deepEqual(clean.findings, []);
    assert.equal(clean.checksum, sha1(over));
    // Removed once its result is recorded (just after it is visible).
    await waitUntil('the spool file is removed', () => spoolOf(svc.dataDir).length === 0);
  });

  test('ASSAY_MAX_FILE_SIZE below the inline size still holds: 413, nothing kept', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: '/nonexistent/clamd.sock',
      ASSAY_MAX_FILE_SIZE: '100',
    });
    const response = await submit(svc.url, svc.auth, randomContent(101));
    assert.equal(response.status, 413);
    assert.deepEqual(spoolOf(svc.dataDir), []);
    assert.equal((await svc.store.jobs.dueSummary(new Date().toISOString())).count, 0);
    assert.equal((await submit(svc.url, svc.auth, randomContent(100))).status, 202);
  });

  test('ASSAY_ASYNC_INLINE_BYTES=0: every upload goes through the spool', async (t) => {
    const svc = await buildService(t, {
      ASSAY_CLAMD: '/nonexistent/clamd.sock',
      ASSAY_ASYNC_INLINE_BYTES: '0',
    });
    const response = await submit(svc.url, svc.auth, randomContent(10));
    assert.equal(response.status, 202);
    const { id } = (await response.json()) as { id: string };
    assert.deepEqual(spoolOf(svc.dataDir), [id]);
  });
});
