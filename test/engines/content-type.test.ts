import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ContentTypeDetector,
  ContentTypeUnavailableError,
} from '../../src/engines/content-type.js';
import { eicar } from '../../src/engines/test-content.js';
import { isUtf8Text } from '../../src/engines/text-type.js';
import { drawing } from '../helpers/images.js';

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

const XML = '<?xml version="1.0"?>\n';

/** Edges of libmagic's rules, each checked against it: where its searches start and stop. */
const EDGE_CORPUS: Record<string, string> = {
  // The audit's upload (an XML declaration and empty comments) is XML to libmagic.
  xmlComments: `<?xml?>${'<!---->'.repeat(20)}`,
  xmlCommentsSvg: `<?xml?>${'<!---->'.repeat(20)}<svg>`,
  xmlVersionCommentsSvg: `${XML}${'<!---->'.repeat(10)}<svg>`,
  xmlDoctypesSvg: `${XML}${'<!DOCTYPE svg>'.repeat(10)}<svg>`,
  svgAfterComment: `${XML}<!-- hi -->\n<svg xmlns="x"></svg>`,
  svgInsideRoot: `${XML}<root><svg xmlns="x"></svg></root>`,
  svgPastWindow: `${XML}<!--${'x'.repeat(5000)}-->\n<svg xmlns="x"></svg>`,
  svgLastInWindow: `<?xml version="1"?>${'x'.repeat(4096)}<svg/>`,
  svgFirstPastWindow: `<?xml version="1"?>${'x'.repeat(4097)}<svg/>`,
  svgUpperCase: `${XML}<SVG xmlns="x"></SVG>`,
  svgSelfClosing: `${XML}<svg/>`,
  svgPrefixed: `${XML}<svg:svg xmlns:svg="x"/>`,
  svgNoVersion: '<?xml?>\n<svg xmlns="x"></svg>',
  svgVersionSingleQuotes: "<?xml version='1.0'?>\n<svg/>",
  svgVersionSpaced: '<?xml version = "1.0"?>\n<svg/>',
  svgVersionLetters: '<?xml version="abc"?>\n<svg/>',
  xhtmlWithSvg: `${XML}<html xmlns="http://www.w3.org/1999/xhtml"><body><svg width="1"></svg></body></html>`,
  xmlUpperCase: '<?XML version="1.0"?>\n<a/>',
  xmlStylesheet: '<?xml-stylesheet href="a"?>\n<a/>',
  doctypeSvg: '<!DOCTYPE svg PUBLIC "x" "y">\n<svg/>',
  doctypeSvgInText: 'hello\n<!DOCTYPE svg>\n',
  doctypeSvgInHtml: '<html><body>\n<!DOCTYPE svg>\n</body></html>',
  doctypeSvgTab: 'hi <!doctype\tsvg>',
  doctypeSvgJoined: 'hi <!doctypesvg>',
  doctypeSvgLastInWindow: `${'x'.repeat(4095)}<!doctype svg>`,
  doctypeSvgPastWindow: `${'x'.repeat(4096)}<!doctype svg>`,
  doctypeSvgInMail: 'From: a@b\n\n<!doctype svg>',
  svgBareSelfClosing: '<svg/>',
  svgBareUpperCase: '<SVG width="1"></SVG>',
  commentThenSvg: '<!-- c -->\n<svg xmlns="x"></svg>',
  // White space before the magic: libmagic reads most magic at offset 0 only.
  spaceSvg: '   <svg width="1"/>',
  spaceXml: '  \n<?xml version="1.0"?>\n<a/>',
  bomSpaceXml: '\uFEFF  <?xml version="1.0"?>\n<a/>',
  bomSvg: `\uFEFF${XML}<svg xmlns="x"></svg>`,
  spacePdf: '  %PDF-1.4\n',
  spaceRtf: '  {\\rtf1 x}',
  spacePostscript: '  %!PS-Adobe\n',
  spacePem: '  -----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
  spaceShebang: '  #!/bin/sh\necho\n',
  spaceVcard: '  BEGIN:VCARD\nVERSION:3.0\nEND:VCARD\n',
  spaceMail: '  Received: from x\nFrom: a@b\n\nbody\n',
  spaceJson: '   {"a": 1}',
  // JSON and CSV come before the magic.
  jsonWithHtml: '{"a": "<html><body>x</body></html>"}',
  jsonWithDoctype: '{"a": "<!doctype svg>"}',
  csvWithHtml: 'a,b\n<html>,c\n1,2\n',
  csvLikeMail: 'From: a, b\nTo: c, d\n',
  csvLikePdf: '%PDF-1,2\n3,4\n',
  csvTwoLinesNoEnd: 'a,b\nc,d',
  csvQuoted: '"a,b",c\n"d,e",f\n',
  csvEscapedQuote: '"a"",b",c\n"d",e\n',
  csvQuoteAcrossLines: '"a\nb",c\nd,e\nf,g\n',
  csvUnclosedQuote: '"a,b,c\nd,e\n',
  csvUnclosedQuoteLate: 'a,b\nc,d\n"e,f\n',
  csvTenLinesOneComma: 'a,b\n'.repeat(10),
  csvTenLinesTwoCommas: 'a,b,c\n'.repeat(10),
  csvNineLinesThenShort: `${'a,b\n'.repeat(9)}a\n`,
  // PEM blocks by their label.
  ...Object.fromEntries(
    [
      'CERTIFICATE',
      'CERTIFICATE REQUEST',
      'NEW CERTIFICATE REQUEST',
      'PRIVATE KEY',
      'RSA PRIVATE KEY',
      'DSA PRIVATE KEY',
      'EC PRIVATE KEY',
      'ENCRYPTED PRIVATE KEY',
      'OPENSSH PRIVATE KEY',
      'PUBLIC KEY',
      'RSA PUBLIC KEY',
      'PGP PUBLIC KEY BLOCK',
      'PGP MESSAGE',
      'X509 CRL',
    ].map((label) => [
      `pem ${label}`,
      `-----BEGIN ${label}-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END ${label}-----\n`,
    ]),
  ),
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

  test('edges of the rules agree with libmagic', async () => {
    for (const [name, text] of Object.entries(EDGE_CORPUS)) {
      const head = Buffer.from(text);
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
      // Generated: a file of the machine's (a Debian logo) is not on every machine.
      await detector.detect(await drawing(), true),
      'image/png',
    );
  });

  test('binary content of no known format is answered here, as the whole database answers it', async () => {
    // Random bytes of several sizes (a control byte first: never UTF-8 text, which the text rules
    // type), and formats' openings cut short or corrupted after a byte.
    const heads = [1, 3, 100, 4096, 65_536, 1024 * 1024].map((size) => {
      const head = randomBytes(size);
      head[0] = 0x01;
      return head;
    });
    for (const name of ['clam.zip', 'clam.exe', 'clam.pdf', 'clam.tar.gz']) {
      const file = readFileSync(join(TESTFILES, name));
      heads.push(Buffer.concat([file.subarray(0, 1), randomBytes(2000)]));
      heads.push(Buffer.concat([randomBytes(7), file]));
    }
    for (const [index, head] of heads.entries()) {
      assert.equal(
        await detector.detect(head, true),
        await detector.detectWithLibmagic(head),
        `head ${index} (${head.length} bytes)`,
      );
    }
    // The worker holds the whole database; the reduced tier answers in this thread without it.
    const closed = await ContentTypeDetector.create();
    await closed.close();
    const unknown = Buffer.alloc(4096, Buffer.from([0x02, 0x9c, 0x11]));
    assert.equal(await closed.detect(unknown, true), 'application/octet-stream');
    await assert.rejects(
      closed.detect(readFileSync(join(TESTFILES, 'clam.zip')), true),
      /the detector is closed/,
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

/** Binary content (libmagic's side) holding a fault marker. */
function binaryWith(marker: string): Buffer {
  return Buffer.concat([Buffer.from([0, 1, 2, 3, 0xff]), randomBytes(64), Buffer.from(marker)]);
}

/** The delay a restart log line announces ("restarting it in 200 ms"). */
function restartDelay(message: string): number {
  const match = /restarting it in (\d+) ms/.exec(message);
  assert.ok(match, message);
  return Number(match[1]);
}

/** Waits until libmagic answers again; returns how long that took. */
async function recovery(detector: ContentTypeDetector, withinMs = 15_000): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < withinMs) {
    try {
      assert.equal(
        await detector.detect(readFileSync(join(TESTFILES, 'clam.zip')), true),
        'application/zip',
      );
      return Date.now() - start;
    } catch (error) {
      assert.ok(error instanceof ContentTypeUnavailableError, String(error));
      await sleep(20);
    }
  }
  throw new Error(`libmagic did not come back within ${withinMs} ms`);
}

describe('when libmagic fails, detection fails, and the detector comes back', () => {
  test('a worker that exits: the call fails, calls fail while it restarts, then it answers', async () => {
    const faulty = await ContentTypeDetector.create(() => {}, { exitOn: 'EXIT-MARKER' });
    try {
      await assert.rejects(faulty.detect(binaryWith('EXIT-MARKER'), true), (error: Error) => {
        assert.ok(error instanceof ContentTypeUnavailableError);
        assert.match(error.message, /exited/);
        return true;
      });
      assert.equal(faulty.available, false);
      await assert.rejects(faulty.detect(randomBytes(100), true), /restarting/);
      // UTF-8 text needs no libmagic.
      assert.equal(await faulty.detect(Buffer.from('plain text'), true), 'text/plain');
      await recovery(faulty);
    } finally {
      await faulty.close();
    }
  });

  test('content that kills the worker again and again costs a quick restart each time', async () => {
    const delays: number[] = [];
    const faulty = await ContentTypeDetector.create(
      (message) => delays.push(restartDelay(message)),
      {
        exitOn: 'EXIT-MARKER',
      },
    );
    try {
      for (let round = 0; round < 5; round++) {
        await assert.rejects(faulty.detect(binaryWith('EXIT-MARKER'), true));
        await recovery(faulty);
      }
      // A worker that answered is healthy: no growing back-off (it would be 100, 200, ... 1600).
      assert.deepEqual(delays, [100, 100, 100, 100, 100]);
    } finally {
      await faulty.close();
    }
  });

  test('a hung worker: the call fails at its deadline, waiting calls fail, it is replaced', async () => {
    const faulty = await ContentTypeDetector.create(() => {}, {
      hangOn: 'HANG-MARKER',
      timeoutMs: 500,
    });
    try {
      const start = Date.now();
      const hung = faulty.detect(binaryWith('HANG-MARKER'), true);
      const behind = faulty.detect(randomBytes(100), true);
      await assert.rejects(hung, /did not answer within 500 ms/);
      await assert.rejects(behind, ContentTypeUnavailableError);
      assert.ok(Date.now() - start < 5_000, 'the deadline held');
      await recovery(faulty);
    } finally {
      await faulty.close();
    }
  });

  test('libmagic erring: the call fails and the worker is replaced', async () => {
    const faulty = await ContentTypeDetector.create(() => {}, { failOn: 'FAIL-MARKER' });
    try {
      await assert.rejects(faulty.detect(binaryWith('FAIL-MARKER'), true), /libmagic failed/);
      await recovery(faulty);
    } finally {
      await faulty.close();
    }
  });

  test('a worker that keeps failing to start: restarts back off, and it comes back', async () => {
    const delays: number[] = [];
    let starts = 0;
    const faulty = await ContentTypeDetector.create(
      (message) => delays.push(restartDelay(message)),
      {
        exitOn: 'EXIT-MARKER',
        // The first start succeeds; the next four fail, the fifth works again.
        failStart: (start) => {
          starts++;
          return start >= 1 && start <= 4;
        },
      },
    );
    try {
      await assert.rejects(faulty.detect(binaryWith('EXIT-MARKER'), true));
      const took = await recovery(faulty);
      assert.equal(starts, 6, 'one start, four failed restarts, one that worked');
      assert.deepEqual(
        delays,
        [100, 200, 400, 800, 1600],
        'each failure in a row doubles the wait',
      );
      assert.ok(took >= 2_500, `back within ${took} ms: the waits were not kept`);
    } finally {
      await faulty.close();
    }
  });
});
