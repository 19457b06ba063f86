import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  GetObjectTaggingCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { BucketSourceService } from '../../src/buckets/bucket-source-service.js';
import { eicar } from '../../src/engines/test-content.js';
import { packageRoot } from '../../src/paths.js';
import { traceOf } from '../helpers/client.js';
import { motoFront, until, useMoto } from '../helpers/moto.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

// Watched buckets against moto's S3 and SQS (S3-to-SQS notifications): what an operator sees in
// the bucket, and the results the objects became.

const clamd = useSharedClamd();
const moto = useMoto();

async function watched(t: Parameters<typeof buildService>[0], env: Record<string, string> = {}) {
  const svc = await buildService(
    t,
    { ASSAY_CLAMD: clamd.socket, ASSAY_BUCKET_QUEUE_WAIT: '1', ...env },
    undefined,
    { bucketVerdictsIntervalMs: 100 },
  );
  return svc;
}

describe('watched buckets', () => {
  test('an object put in a watched bucket is tagged within seconds; EICAR is quarantined, clean content stays, tagged clean; the same bytes elsewhere reuse the verdict', async (t) => {
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

    // The same bytes in another watched bucket of the same key: the verdict is reused, not scanned again.
    const mirror = await moto.bucket('mirror', { notify: true });
    await new BucketSourceService(svc.store).add({
      name: 'mirror',
      keyId: svc.keyId,
      bucket: mirror.name,
      endpoint: moto.endpoint,
      credentials: 'env:MOTO',
      queueUrl: mirror.queueUrl,
    });
    await moto.put(mirror.name, 'copy of report.txt', 'The annual report, in plain words.');
    const copy = await until('the copy tagged', async () => {
      const tags = await moto.tags(mirror.name, 'copy of report.txt');
      return tags?.AssayScanStatus === undefined ? null : tags;
    });
    assert.equal(copy.AssayScanStatus, 'NO_THREATS_FOUND');
    const mirrorSource = await svc.store.bucketSources.findByName('mirror');
    const copyRow = await svc.store.bucketObjects.find(
      mirrorSource?.id ?? '',
      'copy of report.txt',
    );
    const original = await svc.store.bucketObjects.find(source?.id ?? '', 'docs/annual report.txt');
    const trace = await traceOf(svc.url, svc.auth, copyRow?.resultId ?? '');
    assert.ok(
      trace.some((line) => line.startsWith(`verdict of item ${original?.resultId} `)),
      trace.join('\n'),
    );
  });
});

/** MinIO's webhook body (the fixture's shape) announcing `key` of `bucket`. */
function minioEvent(bucket: string, key: string, etag: string): string {
  const event = JSON.parse(
    readFileSync(join(packageRoot(), 'test/fixtures/buckets/minio-webhook-put.json'), 'utf8'),
  );
  event.Key = `${bucket}/${key}`;
  event.Records[0].s3.bucket.name = bucket;
  event.Records[0].s3.object.key = encodeURIComponent(key);
  event.Records[0].s3.object.eTag = etag;
  return JSON.stringify(event);
}

describe('watched buckets: webhooks, refusals and outages', () => {
  test('the webhook refuses an unauthenticated or malformed event; an announced object is scanned and tagged once', async (t) => {
    const svc = await watched(t);
    const uploads = await moto.bucket('hooked');
    const { webhookToken } = await new BucketSourceService(svc.store).add({
      name: 'hooked',
      keyId: svc.keyId,
      bucket: uploads.name,
      endpoint: moto.endpoint,
      credentials: 'env:MOTO',
      webhook: true,
    });
    const etag = await moto.put(uploads.name, 'in/photo notes.txt', 'Notes about a photo.');
    const post = (
      name: string,
      authorization: string | null,
      body: string,
      type = 'application/json',
    ) =>
      fetch(`${svc.url}/bucket-events/${name}`, {
        method: 'POST',
        headers: { 'content-type': type, ...(authorization === null ? {} : { authorization }) },
        body,
      });
    const event = minioEvent(uploads.name, 'in/photo notes.txt', etag);
    for (const [name, authorization] of [
      ['hooked', null],
      ['hooked', 'Bearer wrong-token'],
      ['hooked', `Basic ${webhookToken}`],
      ['elsewhere', `Bearer ${webhookToken}`],
    ] as const) {
      const refused = await post(name, authorization, event);
      assert.equal(refused.status, 401, `${name} ${authorization}`);
      assert.match(((await refused.json()) as { error: string }).error, /bearer token/);
    }
    const auth = `Bearer ${webhookToken}`;
    const malformed = await post('hooked', auth, '{"Records":5}');
    assert.equal(malformed.status, 400);
    assert.match(((await malformed.json()) as { error: string }).error, /no Records list/);
    assert.equal((await post('hooked', auth, event, 'text/plain')).status, 400);
    assert.equal((await post('hooked', auth, `{"pad":"${'x'.repeat(1024 * 1024)}"}`)).status, 413);

    const accepted = await post('hooked', auth, event);
    assert.equal(accepted.status, 200);
    assert.deepEqual(await accepted.json(), { queued: 1, 'in-flight': 0, known: 0, outside: 0 });
    const tags = await until('the announced object tagged', async () => {
      const found = await moto.tags(uploads.name, 'in/photo notes.txt');
      return found?.AssayScanStatus === undefined ? null : found;
    });
    assert.equal(tags.AssayScanStatus, 'NO_THREATS_FOUND');
    // Delivered again (at least once): the same bytes are not scanned again.
    assert.deepEqual(await (await post('hooked', auth, event)).json(), {
      queued: 0,
      'in-flight': 0,
      known: 1,
      outside: 0,
    });
  });

  test('an object Assay may not read ends as ACCESS_DENIED, tagged, with an error result: never clean', async (t) => {
    const svc = await watched(t);
    const front = await motoFront(moto);
    t.after(() => front.close());
    const uploads = await moto.bucket('guarded', { notify: true });
    // GetObject only: its tags may still be read and written.
    front.deny(
      (method, path, query) =>
        method === 'GET' &&
        path.startsWith(`/${uploads.name}/private/`) &&
        !query.includes('tagging'),
    );
    await new BucketSourceService(svc.store).add({
      name: 'guarded',
      keyId: svc.keyId,
      bucket: uploads.name,
      endpoint: front.endpoint,
      credentials: 'env:MOTO',
      queueUrl: uploads.queueUrl?.replace(moto.endpoint, front.endpoint),
    });
    await moto.put(uploads.name, 'private/payroll.csv', 'name,salary\n');
    const tags = await until('the unreadable object tagged', async () => {
      const found = await moto.tags(uploads.name, 'private/payroll.csv');
      return found?.AssayScanStatus === undefined ? null : found;
    });
    assert.equal(tags.AssayScanStatus, 'ACCESS_DENIED');
    assert.ok(front.denied() >= 1);
    const source = await svc.store.bucketSources.findByName('guarded');
    const row = await svc.store.bucketObjects.find(source?.id ?? '', 'private/payroll.csv');
    const result = await svc.store.files.findForAccount(svc.accountId, row?.resultId ?? '');
    assert.equal(result?.findings, null, 'no verdict');
    assert.match(
      result?.error ?? '',
      /^ACCESS_DENIED: the object may not be read \(reading private\/payroll\.csv: AccessDenied \(HTTP 403\)\)$/,
    );
  });

  test('S3 and SQS unreachable for 30 s: the work waits without using attempts, and nothing is lost', async (t) => {
    const svc = await watched(t, { ASSAY_ENGINE_RETRY_MS: '500' });
    const front = await motoFront(moto);
    t.after(() => front.close());
    const uploads = await moto.bucket('flaky', { notify: true });
    const { webhookToken } = await new BucketSourceService(svc.store).add({
      name: 'flaky',
      keyId: svc.keyId,
      bucket: uploads.name,
      endpoint: front.endpoint,
      credentials: 'env:MOTO',
      queueUrl: uploads.queueUrl?.replace(moto.endpoint, front.endpoint),
      webhook: true,
    });
    front.cut();
    const started = Date.now();
    // One object announced on the queue, one by the webhook, while the bucket cannot be reached.
    await moto.put(uploads.name, 'queued.txt', 'Announced on the queue.');
    const etag = await moto.put(uploads.name, 'hooked.txt', 'Announced by the webhook.');
    const accepted = await fetch(`${svc.url}/bucket-events/flaky`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${webhookToken}` },
      body: minioEvent(uploads.name, 'hooked.txt', etag),
    });
    assert.deepEqual(await accepted.json(), { queued: 1, 'in-flight': 0, known: 0, outside: 0 });
    const source = await svc.store.bucketSources.findByName('flaky');
    const jobId = (await svc.store.bucketObjects.find(source?.id ?? '', 'hooked.txt'))?.jobId ?? '';
    await sleep(30_000 - (Date.now() - started));
    assert.equal((await moto.tags(uploads.name, 'hooked.txt'))?.AssayScanStatus, undefined);
    const waiting = await traceOf(svc.url, svc.auth, jobId);
    assert.ok(
      waiting.some((line) =>
        /bucket of flaky is not answering.*without using an attempt/.test(line),
      ),
      waiting.join('\n'),
    );
    front.restore();
    for (const key of ['queued.txt', 'hooked.txt']) {
      const tags = await until(`${key} tagged after the outage`, async () => {
        const found = await moto.tags(uploads.name, key);
        return found?.AssayScanStatus === undefined ? null : found;
      });
      assert.equal(tags.AssayScanStatus, 'NO_THREATS_FOUND', key);
    }
    const trace = await traceOf(svc.url, svc.auth, jobId);
    assert.equal(
      trace.some((line) => /attempt \d+ of \d+ failed/.test(line)),
      false,
      trace.join('\n'),
    );
  });
});

describe('watched buckets: versions', () => {
  test('an object replaced before it was read is given its new bytes’ verdict, never the old; a version is tagged as itself; too large is UNSUPPORTED', async (t) => {
    const svc = await watched(t, { ASSAY_MAX_FILE_SIZE: '4096' });
    const plain = await moto.bucket('replaced');
    const versioned = await moto.bucket('versioned');
    await moto.s3.send(
      new PutBucketVersioningCommand({
        Bucket: versioned.name,
        VersioningConfiguration: { Status: 'Enabled' },
      }),
    );
    const sources = new BucketSourceService(svc.store);
    const hooks: Record<string, string> = {};
    for (const bucket of [plain.name, versioned.name]) {
      const name = bucket.startsWith('replaced') ? 'replaced' : 'versioned';
      const { webhookToken } = await sources.add({
        name,
        keyId: svc.keyId,
        bucket,
        endpoint: moto.endpoint,
        credentials: 'env:MOTO',
        webhook: true,
      });
      hooks[name] = webhookToken ?? '';
    }
    const announce = async (name: string, record: Record<string, unknown>) => {
      const answer = await fetch(`${svc.url}/bucket-events/${name}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${hooks[name]}` },
        body: JSON.stringify({
          Records: [
            {
              eventName: 'ObjectCreated:Put',
              s3: { bucket: { name: record.bucket }, object: record },
            },
          ],
        }),
      });
      assert.equal(answer.status, 200, await answer.clone().text());
    };
    const settled = (bucket: string, key: string, versionId?: string) =>
      until(`${key} tagged`, async () => {
        const { TagSet } = await moto.s3.send(
          new GetObjectTaggingCommand({ Bucket: bucket, Key: key, VersionId: versionId }),
        );
        const tags = Object.fromEntries((TagSet ?? []).map((tag) => [tag.Key, tag.Value]));
        return tags.AssayScanStatus === undefined ? null : tags;
      });

    // Without versions: EICAR replaced by clean content before Assay read it, announced late.
    const oldEtag = await moto.put(plain.name, 'swap.bin', eicar());
    await moto.put(plain.name, 'swap.bin', 'Clean content now.');
    await announce('replaced', { bucket: plain.name, key: 'swap.bin', eTag: oldEtag });
    assert.equal((await settled(plain.name, 'swap.bin')).AssayScanStatus, 'NO_THREATS_FOUND');

    // With versions: the version announced is the one read and tagged, whatever came after.
    const first = await moto.s3.send(
      new PutObjectCommand({ Bucket: versioned.name, Key: 'doc.bin', Body: eicar() }),
    );
    const second = await moto.s3.send(
      new PutObjectCommand({
        Bucket: versioned.name,
        Key: 'doc.bin',
        Body: 'A later, clean version.',
      }),
    );
    await announce('versioned', {
      bucket: versioned.name,
      key: 'doc.bin',
      versionId: first.VersionId,
    });
    const tagged = await settled(versioned.name, 'doc.bin', first.VersionId);
    assert.equal(tagged.AssayScanStatus, 'THREATS_FOUND');
    const latest = await moto.s3.send(
      new GetObjectTaggingCommand({
        Bucket: versioned.name,
        Key: 'doc.bin',
        VersionId: second.VersionId,
      }),
    );
    assert.deepEqual(latest.TagSet, [], 'the later version is not given the first one’s verdict');

    // Over ASSAY_MAX_FILE_SIZE: not scanned, and said so.
    await moto.put(plain.name, 'big.bin', Buffer.alloc(8192, 7));
    await announce('replaced', { bucket: plain.name, key: 'big.bin', size: 8192 });
    assert.equal((await settled(plain.name, 'big.bin')).AssayScanStatus, 'UNSUPPORTED');
  });
});
