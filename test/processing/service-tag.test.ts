import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ServiceTag } from '../../src/processing/service-tag.js';

// ISTag: what appliances decide rescans by.

test('ISTag changes with the signatures, not with clamd’s engine, and survives clamd being away', async () => {
  let parts: string[] | null = [
    'clamd ClamAV 1.0.7, daily 27480 of 2026-11-27T08:00:00.000Z',
    'databases sha256:aaaa',
    'store 3',
  ];
  const tag = new ServiceTag(async () => parts);
  const first = await tag.current();
  assert.match(first, /^"[A-Za-z0-9_-]+"$/);
  assert.ok(Buffer.byteLength(first) <= 32, first);
  // Another engine version, another verdict-cache generation: the same signatures.
  parts = [
    'clamd ClamAV 1.4.1, daily 27480 of 2026-11-27T08:00:00.000Z',
    'databases sha256:aaaa',
    'store 4',
  ];
  assert.equal(await tag.current(), first);
  // A new daily, or any loaded database changed (the operator's YARA rules): a new tag.
  parts = [
    'clamd ClamAV 1.4.1, daily 27481 of 2026-11-28T08:00:00.000Z',
    'databases sha256:aaaa',
    'store 4',
  ];
  const second = await tag.current();
  assert.notEqual(second, first);
  parts = [
    'clamd ClamAV 1.4.1, daily 27481 of 2026-11-28T08:00:00.000Z',
    'databases sha256:bbbb',
    'store 4',
  ];
  const third = await tag.current();
  assert.notEqual(third, second);
  // clamd away: the last tag known, not a new one.
  parts = null;
  assert.equal(await tag.current(), third);
  // Another process reading the same set: the same tag.
  const other = new ServiceTag(async () => [
    'clamd ClamAV 1.0.7, daily 27481 of 2026-11-28T08:00:00.000Z',
    'databases sha256:bbbb',
  ]);
  assert.equal(await other.current(), third);
});
