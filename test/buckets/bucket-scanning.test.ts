import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BucketSourceService } from '../../src/buckets/bucket-source-service.js';
import { eicar } from '../../src/engines/test-content.js';
import { type Moto, startMoto, until } from '../helpers/moto.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// Watched buckets against moto's S3 and SQS (S3-to-SQS notifications): what an operator sees in
// the bucket, and the results the objects became.

const clamd = useSharedClamd();
let moto: Moto;

before(async () => {
  moto = await startMoto();
});
after(async () => {
  await moto.stop();
});

async function watched(t: Parameters<typeof buildService>[0]) {
  const svc = await buildService(
    t,
    { ASSAY_CLAMD: clamd.socket, ASSAY_BUCKET_QUEUE_WAIT: '1' },
    undefined,
    { bucketVerdictsIntervalMs: 100 },
  );
  return svc;
}

describe('watched buckets', () => {
  test('an object put in a watched bucket is tagged within seconds; EICAR is quarantined, clean content stays, tagged clean', async (t) => {
    const svc = await watched(t);
    const uploads = await moto.bucket('uploads', { notify: true });
    const quarantine = await moto.bucket('quarantine');
    await new BucketSourceService(svc.store).add({
      name: 'uploads',
      keyId: svc.keyId,
      bucket: uploads.name,
      endpoint: moto.endpoint,
      credentials: 'env:MOTO',
      queueUrl: uploads.queueUrl,
      onThreat: 'quarantine',
      quarantine: `${quarantine.name}/found`,
    });
    await moto.put(uploads.name, 'docs/annual report.txt', 'The annual report, in plain words.');
    await moto.put(uploads.name, 'docs/eicar.com', eicar());

    const clean = await until('the clean object tagged', async () => {
      const tags = await moto.tags(uploads.name, 'docs/annual report.txt');
      return tags?.AssayScanStatus === undefined ? null : tags;
    });
    assert.equal(clean.AssayScanStatus, 'NO_THREATS_FOUND');
    assert.ok(Date.parse(clean.AssayScanTime ?? '') > 0, 'the scan time');
    assert.equal(clean.AssayScanFindings, undefined);

    const quarantined = await until('EICAR quarantined', async () =>
      (await moto.exists(uploads.name, 'docs/eicar.com'))
        ? null
        : moto.tags(quarantine.name, 'found/docs/eicar.com'),
    );
    assert.equal(quarantined.AssayScanStatus, 'THREATS_FOUND');
    assert.match(quarantined.AssayScanFindings ?? '', /eicar/i);
    assert.deepEqual(await moto.keys(uploads.name), ['docs/annual report.txt']);

    // Each object is an ordinary result of the source's key, naming the object.
    const source = await svc.store.bucketSources.findByName('uploads');
    const row = await svc.store.bucketObjects.find(source?.id ?? '', 'docs/eicar.com');
    const result = await svc.store.files.findForAccount(svc.accountId, row?.resultId ?? '');
    assert.deepEqual(result?.metadata, {
      bucket_source: 'uploads',
      bucket_key: 'docs/eicar.com',
      bucket_etag: row?.etag,
    });
    assert.match(result?.findings?.join() ?? '', /eicar/i);
  });
});
