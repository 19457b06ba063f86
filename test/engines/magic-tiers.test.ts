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
import { looksBinaryToLibmagic } from '../../src/engines/magic-encoding.js';
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

/** ASCII `text` in EBCDIC (the inverse of libmagic's table, for the characters text uses). */
function toEbcdic(text: string): Buffer {
  const ascii = ' abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,\n';
  const ebcdic = [
    0x40, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96,
    0x97, 0x98, 0x99, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xd1, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xe2, 0xe3, 0xe4,
    0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0x4b,
    0x6b, 0x25,
  ];
  return Buffer.from([...text].map((char) => ebcdic[ascii.indexOf(char)] ?? 0x40));
}

/**
 * Heads at the edges of libmagic's encoding checks (magic-encoding.ts): text in each encoding it
 * knows, and text with one byte no text holds, placed before, at and past the 64 KiB it looks at,
 * or among trailing NULs (which its second check trims).
 */
function textEdges(): Array<[string, Buffer]> {
  const prose = 'The quick brown fox jumps over the lazy dog, 1234567890.\n'.repeat(1400);
  const ascii = Buffer.from(prose, 'latin1');
  const withByte = (base: Buffer, at: number, byte: number) => {
    const copy = Buffer.from(base);
    copy[at] = byte;
    return copy;
  };
  const cases: Array<[string, Buffer]> = [
    ['ascii', ascii],
    ['latin1', Buffer.from(`${prose}Caf\u00e9 cr\u00e8me`, 'latin1')],
    ['windows-1252', Buffer.concat([ascii, Buffer.from([0x93, 0x41, 0x94, 0x80])])],
    ['utf-8 with BOM', Buffer.from(`\ufeff${prose}\u00e9`, 'utf8')],
    ['utf-16le with BOM', Buffer.from(`\ufeff${prose.slice(0, 9000)}`, 'utf16le')],
    ['utf-16be with BOM', Buffer.from(`\ufeff${prose.slice(0, 9000)}`, 'utf16le').swap16()],
    ['utf-16le without BOM', Buffer.from(prose.slice(0, 9000), 'utf16le')],
    [
      'utf-32le with BOM',
      Buffer.concat([
        Buffer.from([0xff, 0xfe, 0, 0]),
        Buffer.from('hello\n'.repeat(50), 'utf16le'),
      ]),
    ],
    ['utf-32be with BOM', Buffer.from([0, 0, 0xfe, 0xff, 0, 0, 0, 0x41, 0, 0, 0, 0x0a])],
    ['ebcdic', toEbcdic('Hello from a mainframe, record 1.\n'.repeat(200))],
    ['ebcdic with a NUL', withByte(toEbcdic('Hello, record 2.\n'.repeat(200)), 77, 0)],
    ['text then NULs', Buffer.concat([ascii.subarray(0, 5000), Buffer.alloc(3000)])],
    [
      'text, a NUL, then NULs',
      Buffer.concat([withByte(ascii.subarray(0, 5000), 4999, 0), Buffer.alloc(99)]),
    ],
    [
      'latin1 then NULs',
      Buffer.concat([Buffer.from('caf\u00e9 '.repeat(900), 'latin1'), Buffer.alloc(7)]),
    ],
    ['a lone NUL', Buffer.from([0])],
    ['two NULs', Buffer.from([0, 0])],
    ['a control byte alone', Buffer.from([1, 0x41])],
    ['DEL in ascii', withByte(ascii, 3000, 0x7f)],
  ];
  for (const at of [0, 1, 3, 500, 65_534, 65_535, 65_536, 70_000]) {
    for (const byte of [0x00, 0x01, 0x1b, 0x1c, 0x7f, 0x85]) {
      cases.push([`ascii, byte ${byte} at ${at}`, withByte(ascii, at, byte)]);
    }
  }
  return cases;
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

  test('binary heads holding the values of tests both passes run, in any case and spacing: the same answer', () => {
    // Tests libmagic runs in its binary and its text pass (`search/4096/cWt <!doctype svg`, say)
    // leave the reduced tier too: their conditions hold for binary heads whatever the case and
    // blanks libmagic's flags allow.
    const view = new DataView(database.buffer, database.byteOffset, database.length);
    const tests = view.getUint32(8, true);
    let planted = 0;
    for (let index = 0; index < tests; index++) {
      const at = (index + 1) * ENTRY_BYTES;
      if (view.getUint8(at + 2) !== 0 || (view.getUint16(at, true) & 0x60) !== 0x60) continue;
      const type = view.getUint8(at + 6);
      if (![5, 17, 20].includes(type)) continue;
      const value = Buffer.from(database.subarray(at + 32, at + 32 + view.getUint8(at + 5)));
      const offset = Math.max(0, view.getInt32(at + 12, true));
      const text = value.toString('latin1');
      const variants = [text, text.toUpperCase(), text.toLowerCase(), text.replaceAll(' ', '  ')];
      for (const variant of variants) {
        for (const shift of [0, 37, 3000]) {
          const head = randomBytes(offset + 4096);
          head[offset + 4095] = 0; // binary whatever the random bytes
          head.write(variant, offset + shift, 'latin1');
          compare(`${JSON.stringify(text)} as ${JSON.stringify(variant)} at +${shift}`, head);
          planted++;
        }
      }
    }
    assert.ok(planted > 0, 'the database has tests both passes run');
    assert.deepEqual(differences, []);
  });

  test('text in every encoding libmagic checks, and text with one binary byte: the same answer', () => {
    for (const [name, head] of textEdges()) compare(name, head);
    assert.deepEqual(differences, []);
  });

  test('what is proved binary: a byte text never holds and one EBCDIC text never holds', () => {
    const binary = Buffer.from([0x41, 0x00, 0x42, 0x43]);
    assert.equal(looksBinaryToLibmagic(binary), true);
    // A BOM of UTF-16 or UTF-32: libmagic reads on as text, whatever follows.
    for (const bom of [
      [0xff, 0xfe],
      [0xfe, 0xff],
      [0x00, 0x00, 0xfe, 0xff],
    ]) {
      assert.equal(looksBinaryToLibmagic(Buffer.from([...bom, 0x00, 0x01, 0x00])), false);
    }
    // DEL is no ASCII text, but EBCDIC's translation of it and of letters is.
    assert.equal(looksBinaryToLibmagic(Buffer.from('ABC\u007fDEF', 'latin1')), false);
    // Trailing NULs are trimmed by libmagic's second look; 64 KiB is as far as it looks.
    assert.equal(looksBinaryToLibmagic(Buffer.from('text\0\0\0', 'latin1')), false);
    const late = Buffer.alloc(70_000, 0x41);
    late[65_536] = 0;
    assert.equal(looksBinaryToLibmagic(late), false);
    late[65_535] = 0;
    assert.equal(looksBinaryToLibmagic(late), true);
  });

  test('random content: the same answer, and nearly all of it takes the reduced tier', () => {
    let reduced = 0;
    let longer = 0;
    const sizes = [1, 100, 600, 4096, 65_536];
    for (let i = 0; i < 500; i++) {
      const head = randomBytes(sizes[i % sizes.length] as number);
      compare(`random ${head.length} bytes`, head);
      // A single byte seldom proves itself binary (magic-encoding.ts); libmagic tests none anyway.
      if (head.length === 1) continue;
      longer++;
      if (!tiered.takesFullDatabase(head)) reduced++;
    }
    assert.deepEqual(differences, []);
    assert.ok(reduced > 0.9 * longer, `only ${reduced} of ${longer} took the reduced tier`);
  });
});
