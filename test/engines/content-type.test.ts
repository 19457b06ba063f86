import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ContentTypeDetector, isUtf8Text } from '../../src/engines/content-type.js';
import { eicar } from '../../src/engines/test-content.js';

const TESTFILES = '/usr/share/clamav-testfiles';

/** Text in the formats libmagic names; the fast text rules must give libmagic's answer. */
const TEXT_CORPUS: Record<string, string> = {
  plain: 'The quick brown fox.\nSecond line.\n',
  eicar: eicar(),
  utf8: 'Grüße aus Köln – ñandú 日本語\n',
  bom: '\uFEFFhello with a byte order mark\n',
  html: '<!DOCTYPE html>\n<html><body>hi</body></html>',
  htmlIndented: '  <html>\n<head><title>x</title></head></html>',
  htmlFragment: 'Click <a href="https://example.com">here</a>',
  xml: '<?xml version="1.0" encoding="UTF-8"?>\n<root><a/></root>',
  svg: '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"></svg>',
  svgBare: '<svg xmlns="http://www.w3.org/2000/svg" width="1"></svg>',
  json: '{"a": [1, 2, {"b": null}]}',
  jsonArray: '[1,2,3]',
  brokenJson: '{ not json',
  csv: 'a,b,c\n1,2,3\n4,5,6\n',
  python: '#!/usr/bin/env python3\nprint(1)\n',
  sh: '#!/bin/sh\necho hi\n',
  bash: '#!/bin/bash\necho hi\n',
  perl: '#!/usr/bin/perl\nprint 1;\n',
  node: '#!/usr/bin/env node\nconsole.log(1)\n',
  rtf: '{\\rtf1\\ansi hello}',
  postscript: '%!PS-Adobe-3.0\n',
  pdf: '%PDF-1.4\n1 0 obj\n<<>>\nendobj\n',
  mail: 'Received: from x by y\nFrom: a@b\nTo: c@d\nSubject: hi\n\nbody\n',
  mailFrom: 'From: a@b\nTo: c@d\nSubject: hi\n\nbody\n',
  mimeOnly: 'MIME-Version: 1.0\nFrom: a@b\nSubject: x\n\nbody',
  mbox: 'From test@example.com  Thu Jul 31 13:51:21 2008\nFrom: a@b\n\nbody\n',
  vcard: 'BEGIN:VCARD\nVERSION:3.0\nFN:X\nEND:VCARD\n',
  calendar: 'BEGIN:VCALENDAR\nVERSION:2.0\nEND:VCALENDAR\n',
  pem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
  markdown: '# Title\n\nSome *markdown* text\n',
};

/** Where the fast path deliberately says text/plain: libmagic's source-code guesses cost ms. */
const KNOWN_DIFFERENCES: Record<string, [string, string]> = {
  c: ['#include <stdio.h>\nint main(void) { return 0; }\n', 'text/x-c'],
  java: ['public class X { public static void main(String[] a) {} }\n', 'text/x-java'],
};

let detector: ContentTypeDetector;
before(async () => {
  detector = await ContentTypeDetector.create();
});
after(async () => {
  await detector.close();
});

describe('content type detection', () => {
  test('text formats: the fast rules agree with libmagic', async () => {
    for (const [name, text] of Object.entries(TEXT_CORPUS)) {
      const head = Buffer.from(text);
      assert.ok(isUtf8Text(head), name);
      assert.equal(
        await detector.detect(head, true),
        await detector.detectWithLibmagic(head),
        name,
      );
    }
  });

  test('the text samples of clamav-testfiles agree with libmagic', async () => {
    for (const name of readdirSync(TESTFILES)) {
      const head = readFileSync(join(TESTFILES, name));
      assert.equal(
        await detector.detect(head, true),
        await detector.detectWithLibmagic(head),
        name,
      );
    }
  });

  test('source code is text/plain where libmagic guesses the language', async () => {
    for (const [name, [text, libmagic]] of Object.entries(KNOWN_DIFFERENCES)) {
      assert.equal(await detector.detect(Buffer.from(text), true), 'text/plain', name);
      assert.equal(await detector.detectWithLibmagic(Buffer.from(text)), libmagic, name);
    }
  });

  test('binary formats go to libmagic, with the vendor names clients expect', async () => {
    assert.equal(
      await detector.detect(readFileSync(join(TESTFILES, 'clam.exe')), true),
      'application/x-msdownload',
    );
    assert.equal(
      await detector.detect(readFileSync(join(TESTFILES, 'clam.zip')), true),
      'application/zip',
    );
    assert.equal(
      await detector.detect(readFileSync(join(TESTFILES, 'clam.pdf')), true),
      'application/pdf',
    );
    assert.equal(
      await detector.detect(readFileSync(join(TESTFILES, 'clam.tar.gz')), true),
      'application/gzip',
    );
    assert.equal(
      await detector.detect(readFileSync('static/samples/image.jpg'), true),
      'image/jpeg',
    );
    assert.equal(
      await detector.detect(readFileSync('/usr/share/pixmaps/debian-logo.png'), true),
      'image/png',
    );
  });

  test('a JSON document larger than the sniffed head is still JSON by its opening', async () => {
    const big = Buffer.from(`{"items": [${'"x",'.repeat(40_000)}"y"]}`);
    assert.equal(await detector.detect(big.subarray(0, 1024), false), 'application/json');
    assert.equal(await detector.detect(Buffer.from('{"cut": tru'), true), 'text/plain');
  });

  test('what is not UTF-8 text is not classified as such', () => {
    assert.equal(isUtf8Text(Buffer.from([0x68, 0x69, 0x00, 0x21])), false, 'NUL');
    assert.equal(isUtf8Text(Buffer.from([0x68, 0xff, 0xfe, 0x21])), false, 'invalid UTF-8');
    assert.equal(isUtf8Text(Buffer.from('caf\u00e9 au lait', 'latin1')), false, 'Latin-1');
    assert.equal(
      isUtf8Text(Buffer.from('日本').subarray(0, 4)),
      true,
      'a character cut at the end',
    );
    assert.equal(isUtf8Text(randomBytes(4096)), false, 'random bytes');
  });
});
