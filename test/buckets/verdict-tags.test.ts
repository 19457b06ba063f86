import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_TAG_NAMES,
  isTagKey,
  MAX_TAGS,
  mergeVerdictTags,
  type Tag,
  tagValue,
  verdictOfTags,
} from '../../src/buckets/verdict-tags.js';

const AT = '2026-11-28T10:00:00.000Z';

function own(count: number): Tag[] {
  return Array.from({ length: count }, (_, index) => ({ Key: `team${index}`, Value: `v${index}` }));
}

describe('verdict tags', () => {
  test('a clean object keeps its own tags and gains the status and the time', () => {
    assert.deepEqual(
      mergeVerdictTags(own(2), { status: 'NO_THREATS_FOUND', findings: [], scannedAt: AT }),
      [
        ...own(2),
        { Key: 'AssayScanStatus', Value: 'NO_THREATS_FOUND' },
        { Key: 'AssayScanTime', Value: AT },
      ],
    );
  });

  test('a verdict replaces the previous one instead of adding to it', () => {
    const first = mergeVerdictTags(own(1), {
      status: 'NO_THREATS_FOUND',
      findings: [],
      scannedAt: AT,
    }) as Tag[];
    const second = mergeVerdictTags(first, {
      status: 'THREATS_FOUND',
      findings: ['content.malicious.eicar-test-signature'],
      scannedAt: '2026-11-29T10:00:00.000Z',
    }) as Tag[];
    assert.deepEqual(second, [
      ...own(1),
      { Key: 'AssayScanStatus', Value: 'THREATS_FOUND' },
      { Key: 'AssayScanTime', Value: '2026-11-29T10:00:00.000Z' },
      { Key: 'AssayScanFindings', Value: 'content.malicious.eicar-test-signature' },
    ]);
    assert.equal(verdictOfTags(second), 'THREATS_FOUND');
  });

  test("S3's ten tags: the status first, then the time, then the findings; none when full", () => {
    const verdict = { status: 'THREATS_FOUND' as const, findings: ['a'], scannedAt: AT };
    assert.equal(mergeVerdictTags(own(7), verdict)?.length, MAX_TAGS);
    assert.deepEqual(
      mergeVerdictTags(own(8), verdict)
        ?.slice(8)
        .map((tag) => tag.Key),
      ['AssayScanStatus', 'AssayScanTime'],
    );
    assert.deepEqual(
      mergeVerdictTags(own(9), verdict)
        ?.slice(9)
        .map((tag) => tag.Key),
      ['AssayScanStatus'],
    );
    assert.equal(mergeVerdictTags(own(10), verdict), null, 'no room even for the status');
  });

  test('tag names can be the operator’s own', () => {
    const names = { ...DEFAULT_TAG_NAMES, status: 'GuardDutyMalwareScanStatus' };
    const tags = mergeVerdictTags([], { status: 'FAILED', findings: [], scannedAt: AT }, names);
    assert.equal(verdictOfTags(tags ?? [], names), 'FAILED');
    assert.equal(verdictOfTags(tags ?? []), null);
  });

  test('values keep to the characters S3 takes and to 256 of them', () => {
    assert.equal(tagValue('yara.Evil<rule>*'), 'yara.Evil_rule__');
    const long = tagValue(
      Array.from({ length: 40 }, (_, i) => `content.malicious.n${i}`).join(' '),
    );
    assert.equal(Array.from(long).length, 256);
    assert.match(long, /\.\.\.$/);
    assert.equal(Array.from(tagValue('é'.repeat(300))).length, 256);
    assert.ok(isTagKey('AssayScanStatus'));
    assert.equal(isTagKey('aws:reserved'), false);
    assert.equal(isTagKey('x'.repeat(129)), false);
    assert.equal(isTagKey('bad*key'), false);
  });
});
