import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { BucketSourceService } from '../../src/buckets/bucket-source-service.js';
import { randomContent } from '../helpers/content.js';
import { startLocalServer } from '../helpers/local-server.js';
import { until, useMoto } from '../helpers/moto.js';
import { buildService, tempDir } from '../helpers/service.js';

// Issue 42: clean objects scanned again when the signatures change, within their window.

const moto = useMoto();

describe('bucket rescans', () => {
  test('a new .ndb matching an object scanned clean: it is rescanned, re-tagged and reported by callback; an object outside the window is not', async (t) => {
    const signatures = tempDir('assay-signatures-');
    t.after(() => rmSync(signatures, { recursive: true, force: true }));
    const own = join(signatures, 'mine');
    mkdirSync(own);
    const receiver = await startLocalServer((_request, response) => response.end());
    t.after(() => receiver.close());
    const svc = await buildService(
      t,
      {
        ASSAY_SIGNATURES_DIR: own,
        ASSAY_SIGNATURES_CHECK: '1',
        ASSAY_ENGINE_VERSIONS_MAX_AGE_MS: '0',
        ASSAY_FETCH_ALLOW: '127.0.0.1/32',
        ASSAY_BUCKET_QUEUE_WAIT: '1',
        ASSAY_BUCKET_RESCAN_WINDOW: '86400',
      },
      undefined,
      { bucketVerdictsIntervalMs: 100, bucketRescansIntervalMs: 200 },
    );
    const uploads = await moto.bucket('rescanned', { notify: true });
    await new BucketSourceService(svc.store).add({
      name: 'rescanned',
      keyId: svc.keyId,
      bucket: uploads.name,
      endpoint: moto.endpoint,
      credentials: 'env:MOTO',
      queueUrl: uploads.queueUrl,
      callback: `${receiver.url}/results`,
    });
    // Both carry a marker no signature knows yet.
    const marker = randomBytes(24);
    const carrying = () => Buffer.concat([randomContent(600), marker, randomContent(600)]);
    await moto.put(uploads.name, 'recent.bin', carrying());
    await moto.put(uploads.name, 'old.bin', carrying());
    const statusOf = async (key: string) => (await moto.tags(uploads.name, key))?.AssayScanStatus;
    for (const key of ['recent.bin', 'old.bin']) {
      await until(`${key} tagged`, async () => ((await statusOf(key)) === undefined ? null : true));
      assert.equal(await statusOf(key), 'NO_THREATS_FOUND', key);
    }
    await until('both first results reported', async () =>
      receiver.requests.length >= 2 ? true : null,
    );
    // old.bin was scanned clean before the window (a day): a change of signatures leaves it.
    const source = await svc.store.bucketSources.findByName('rescanned');
    const sourceId = source?.id ?? '';
    await svc.store.db
      .updateTable('bucket_objects')
      .set({ scanned_at: new Date(Date.now() - 2 * 86_400_000).toISOString() })
      .where('source_id', '=', sourceId)
      .where('object_key', '=', 'old.bin')
      .execute();

    const file = join(own, 'assay-test.ndb');
    writeFileSync(`${file}.new`, `Assay.Test.Rescan:0:*:${marker.toString('hex')}\n`);
    renameSync(`${file}.new`, file);

    await until(
      'recent.bin re-tagged',
      async () => ((await statusOf('recent.bin')) === 'THREATS_FOUND' ? true : null),
      60_000,
    );
    const tags = await moto.tags(uploads.name, 'recent.bin');
    assert.equal(tags?.AssayScanFindings, 'content.malicious.assay.test.rescan');
    const reported = await until('the rescan reported by callback', async () => {
      const flagged = receiver.requests
        .map((request) => JSON.parse(request.body.toString()) as Record<string, unknown>)
        .find((body) =>
          JSON.stringify(body.findings ?? '').includes('content.malicious.assay.test.rescan'),
        );
      return flagged ?? null;
    });
    assert.equal((reported.metadata as Record<string, string>).bucket_key, 'recent.bin');
    assert.equal(
      await statusOf('old.bin'),
      'NO_THREATS_FOUND',
      'outside the window: not rescanned',
    );
    const old = await svc.store.bucketObjects.find(sourceId, 'old.bin');
    assert.equal(old?.jobId, null);
    const metrics = await (await fetch(`${svc.url}/metrics`)).text();
    assert.match(metrics, /assay_bucket_newly_flagged_total\{source="rescanned"\} 1\b/);
  });
});
