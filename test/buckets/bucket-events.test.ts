import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  BucketEventError,
  MAX_EVENT_BYTES,
  MAX_EVENT_RECORDS,
  parseBucketEvent,
} from '../../src/buckets/bucket-events.js';
import { packageRoot } from '../../src/paths.js';

// The event shapes of AWS (S3 to SQS, or through SNS) and MinIO (its webhook), which cannot be
// reached from here: fixtures written to their documented shapes.

function fixture(name: string): string {
  return readFileSync(join(packageRoot(), 'test/fixtures/buckets', name), 'utf8');
}

function record(object: Record<string, unknown>, eventName = 'ObjectCreated:Put') {
  return { eventName, s3: { bucket: { name: 'uploads' }, object } };
}

describe('bucket events', () => {
  test("AWS's event: the key decoded, the eTag without quotes, the version and the sequencer", () => {
    assert.deepEqual(parseBucketEvent(fixture('aws-s3-put.json')), {
      kind: 'records',
      ignored: 0,
      objects: [
        {
          bucket: 'uploads-example',
          key: 'incoming/annual report (2026).pdf',
          size: 1048576,
          etag: 'd41d8cd98f00b204e9800998ecf8427e',
          versionId: '096fKKXTRTtl3on89fVO.nfljtsv6qko',
          sequencer: '0055AED6DCD90281E5',
        },
      ],
    });
  });

  test("S3's test event, sent when notifications are set up, has nothing to scan", () => {
    assert.deepEqual(parseBucketEvent(fixture('aws-s3-test-event.json')), { kind: 'test' });
  });

  test("MinIO's webhook body: s3:-prefixed event names, an unversioned object", () => {
    const event = parseBucketEvent(fixture('minio-webhook-put.json'));
    assert.equal(event.kind, 'records');
    assert.deepEqual(event.kind === 'records' && event.objects, [
      {
        bucket: 'uploads',
        key: 'photos/cat picture.jpg',
        size: 52311,
        etag: '3858f62230ac3c915f300c664312c63f',
        versionId: null,
        sequencer: '187C2A5E4C0B9A11',
      },
    ]);
  });

  test('an S3 event inside an SNS notification', () => {
    const wrapped = JSON.stringify({
      Type: 'Notification',
      MessageId: 'f1c5e0a2',
      TopicArn: 'arn:aws:sns:eu-west-1:123456789012:uploads',
      Message: fixture('aws-s3-put.json'),
    });
    const event = parseBucketEvent(wrapped);
    assert.equal(
      event.kind === 'records' && event.objects[0]?.key,
      'incoming/annual report (2026).pdf',
    );
  });

  test('a plus is a space and %2B a plus; removals are counted, not scanned', () => {
    const event = parseBucketEvent(
      JSON.stringify({
        Records: [
          record({ key: 'a+b%2Bc.txt', eTag: '"abc"' }),
          record({ key: 'gone.txt' }, 'ObjectRemoved:Delete'),
          record({ key: 'copied.txt' }, 'ObjectCreated:Copy'),
        ],
      }),
    );
    assert.deepEqual(
      event.kind === 'records' && event.objects.map((object) => [object.key, object.etag]),
      [
        ['a b+c.txt', 'abc'],
        ['copied.txt', null],
      ],
    );
    assert.equal(event.kind === 'records' && event.ignored, 1);
  });

  test('what is not an event is refused with the reason', () => {
    const refusals: Array<[string, RegExp]> = [
      ['not json', /not JSON/],
      ['[]', /not a JSON object/],
      ['{}', /no Records list/],
      ['{"Records":{}}', /no Records list/],
      ['{"Records":[1]}', /record 0 is not an object/],
      ['{"Records":[{}]}', /record 0 has no eventName/],
      [JSON.stringify({ Records: [{ eventName: 'ObjectCreated:Put' }] }), /no s3.bucket/],
      [JSON.stringify({ Records: [record({})] }), /no object key/],
      [JSON.stringify({ Records: [record({ key: '' })] }), /empty or over 1024 bytes/],
      [JSON.stringify({ Records: [record({ key: 'x'.repeat(1025) })] }), /over 1024 bytes/],
      [JSON.stringify({ Records: [record({ key: '%E2%82' })] }), /not URL-encoded text/],
      [JSON.stringify({ Records: [record({ key: 'a', size: -1 })] }), /size is not a whole/],
      [JSON.stringify({ Records: [record({ key: 'a', size: '12' })] }), /size is not a whole/],
      [JSON.stringify({ Records: [record({ key: 'a', eTag: 7 })] }), /eTag is not text/],
      [
        JSON.stringify({
          Records: [
            {
              eventName: 'ObjectCreated:Put',
              s3: { bucket: { name: 'A_B' }, object: { key: 'a' } },
            },
          ],
        }),
        /no valid bucket name/,
      ],
      [
        JSON.stringify({ Records: Array.from({ length: MAX_EVENT_RECORDS + 1 }, () => ({})) }),
        /over 1000 records/,
      ],
      [`{"Records":[],"pad":"${'x'.repeat(MAX_EVENT_BYTES)}"}`, /over 1048576 bytes/],
    ];
    for (const [text, reason] of refusals) {
      assert.throws(
        () => parseBucketEvent(text),
        (error: unknown) => error instanceof BucketEventError && reason.test(error.message),
        text.slice(0, 80),
      );
    }
  });
});
