/**
 * The two tiers of libmagic's database (src/engines/magic-tiers.ts) answer exactly what the full
 * database answers: over files of many formats, cut and mutated, heads carrying each removed test's
 * own value at its offset, and random content. Their time on hostile heads: magic-tiers-timed.test.ts.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Libmagic } from '../../src/engines/libmagic.js';
import { eicar } from '../../src/engines/test-content.js';
import { docxWithText, pdfWithText } from '../helpers/documents.js';
import { drawing, photoLike } from '../helpers/images.js';
import { tarArchive } from '../helpers/tar.js';
import { zipStored } from '../helpers/zip.js';

const TESTFILES = '/usr/share/clamav-testfiles';
const ENTRY_BYTES = 432;

/** Formats whose magic sits at an offset, at a distance, or inside: generated here. */
async function generatedFormats(): Promise<Array<[string, Buffer]>> {
  const iso = randomBytes(40_000);
  iso.fill(0, 0, 32_768);
  iso.write('\u0001CD001\u0001', 32_768, 'latin1'); // ISO 9660's volume descriptor at 32 KiB
  const ole2 = Buffer.concat([
    Buffer.from('d0cf11e0a1b11ae1', 'hex'),
    Buffer.alloc(16),
    Buffer.from('3e000300feff0900', 'hex'),
    randomBytes(4000),
  ]);
  const pe = Buffer.alloc(1024);
  pe.write('MZ', 0);
  pe.writeUInt32LE(0x80, 0x3c);
  pe.write('PE\0\0', 0x80, 'latin1');
  pe.writeUInt16LE(0x14c, 0x84);
  const elf = Buffer.concat([
    Buffer.from('7f454c4602010100', 'hex'),
    Buffer.alloc(8),
    randomBytes(512),
  ]);
  return [
    ['pdf', pdfWithText(['a tiered libmagic'])],
    ['docx', docxWithText(['tiers'])],
    ['zip', zipStored([{ name: 'a.txt', data: Buffer.from('hello') }])],
    ['gzip', gzipSync(randomBytes(5000))],
    ['tar', tarArchive([['a.bin', randomBytes(3000)]])],
    ['iso9660', iso],
    ['ole2', ole2],
    ['pe', pe],
    ['elf', elf],
    ['jpeg', await photoLike(64, 48, 7)],
    ['png', await drawing()],
    [
      'latin1',
      Buffer.from('Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade\n', 'latin1'),
    ],
    ['utf16', Buffer.from('\ufeffhello in UTF-16, little-endian\n', 'utf16le')],
    ['eicar', Buffer.from(eicar())],
    ['shebang-env', Buffer.from('#!/usr/bin/env -S node --flag\n\u0000binary tail')],
  ];
}

function installedTestfiles(): Array<[string, Buffer]> {
  return readdirSync(TESTFILES).map((name) => [name, readFileSync(join(TESTFILES, name))]);
}

/**
 * A random head carrying the value of each top-level binary test of the database at its offset:
 * every removed test's condition holds for one of them, and most kept tests' do too.
 */
function plantedHeads(database: Uint8Array): Buffer[] {
  const view = new DataView(database.buffer, database.byteOffset, database.length);
  const tests = view.getUint32(8, true);
  const heads: Buffer[] = [];
  for (let index = 0; index < tests; index++) {
    const at = (index + 1) * ENTRY_BYTES;
    if (view.getUint8(at + 2) !== 0) continue; // a continuation
    const offset = view.getInt32(at + 12, true);
    const type = view.getUint8(at + 6);
    if (offset < 0 || offset > 60_000) continue;
    const length = [5, 17, 20].includes(type) ? view.getUint8(at + 5) : 8;
    const value = database.subarray(at + 32, at + 32 + Math.min(length, 128));
    const head = randomBytes(Math.max(4096, offset + value.length + 64));
    head.set(value, offset);
    heads.push(head);
  }
  return heads;
}

describe('libmagic in two tiers', () => {
  let full: Libmagic;
  let tiered: Libmagic;
  let database: Uint8Array;
  const differences: string[] = [];
  const compare = (label: string, head: Uint8Array) => {
    const expected = full.detect(head);
    const actual = tiered.detect(head);
    if (actual !== expected) differences.push(`${label}: ${expected} became ${actual}`);
  };

  before(async () => {
    [full, tiered, database] = await Promise.all([
      Libmagic.create({ tiered: false }),
      Libmagic.create(),
      Libmagic.bundledDatabase(),
    ]);
  });

  test('the bundled database splits: most top-level tests leave the reduced tier', () => {
    const split = tiered.split;
    assert.ok(split !== null, 'the database did not split');
    assert.ok(split.removed > 3000, `only ${split.removed} tests removed`);
    assert.ok(split.kept < 800, `${split.kept} tests kept`);
  });

  test('formats, their first 4 KB, and a byte flipped: the same answer as the full database', async () => {
    const corpus = [...installedTestfiles(), ...(await generatedFormats())];
    assert.ok(corpus.length >= 50);
    for (const [name, content] of corpus) {
      compare(name, content.subarray(0, 1024 * 1024));
      compare(`${name} (4 KB)`, content.subarray(0, 4096));
      for (const at of [0, 2, 8, 64, 257, 1000]) {
        if (at >= content.length) continue;
        const mutated = Buffer.from(content.subarray(0, 64 * 1024));
        mutated[at] = (mutated[at] ?? 0) ^ 0x20;
        compare(`${name} (byte ${at} flipped)`, mutated);
      }
    }
    assert.deepEqual(differences, []);
  });

  test("heads carrying each test's own value: the same answer, and they take the full tier", () => {
    const heads = plantedHeads(database);
    assert.ok(heads.length > 3000);
    let full = 0;
    for (const [i, head] of heads.entries()) {
      compare(`planted value ${i}`, head);
      if (tiered.takesFullDatabase(head)) full++;
    }
    assert.deepEqual(differences, []);
    // Nearly every removed test's value sends its head to the full tier.
    assert.ok(full > 0.7 * heads.length, `${full} of ${heads.length} planted heads`);
  });

  test('random content: the same answer, and nearly all of it takes the reduced tier', () => {
    let reduced = 0;
    const sizes = [1, 100, 600, 4096, 65_536];
    for (let i = 0; i < 500; i++) {
      const head = randomBytes(sizes[i % sizes.length] as number);
      compare(`random ${head.length} bytes`, head);
      if (!tiered.takesFullDatabase(head)) reduced++;
    }
    assert.deepEqual(differences, []);
    assert.ok(reduced > 0.9 * 500, `only ${reduced} of 500 took the reduced tier`);
  });
});
