/**
 * Hostile files, built at run time (no binary fixture, no EICAR file: the malware string comes from
 * eicar()), each with what it must end in. Sent by `npm run hostile-files` (soak/hostile-files.ts)
 * and test/scripts/hostile-files.test.ts with a key of every category (MALWARE, NSFW_IMAGE,
 * NSFW_LANGUAGE) and the default ASSAY_UNEXAMINED=finding. What the service documents (API.md):
 * content clamd could not fully examine is a `content.malicious.heuristics.limits.exceeded.*`
 * finding; an engine that cannot decide makes the item 422 (sync) or a result with `error` (async),
 * unless another engine found something. Never `findings: []` for content that was not examined
 * whole: where an item could pass, a marker an engine flags sits where only a whole examination
 * reaches (the innermost level, the last entry, after the bomb), so that a partial pass shows.
 */
import { randomBytes } from 'node:crypto';
import sharp from 'sharp';
import { eicar, LANGUAGE_TEST_MARKER } from '../src/engines/test-content.js';
import {
  DOCUMENT_XML,
  docxWithDocumentXml,
  paragraphXml,
  pdfPageTree,
  pdfWithText,
} from '../test/helpers/documents.js';
import { photoLike, pngBomb } from '../test/helpers/images.js';
import { type Deflated, deflateRepeated, zipArchive, zipStored } from '../test/helpers/zip.js';

/**
 * `finding`: findings matching `match` (one at least). `error`: 422 or a result whose `error`
 * matches. `unexamined`: a finding or an error, never `[]`, where which depends on the deployment's
 * limits (clamd's come from ASSAY_MAX_FILE_SIZE) and on which engine gives up first.
 */
export type Expectation =
  | { outcome: 'finding'; match: RegExp }
  | { outcome: 'error'; match: RegExp }
  | { outcome: 'unexamined' };

export interface HostileItem {
  name: string;
  content: Buffer;
  expect: Expectation;
  /** Why that is the outcome the service documents. */
  why: string;
}

/**
 * Each item's answer comes within this: the language engine's time cap is 30 s (the PDF of 2^27
 * pages reaches it), plus 15 s for the rest (upload, clamd, a job's claim, the other copy of the
 * item on a 2-core machine). Every other item answers within a few seconds.
 */
export const ITEM_BOUND_MS = 45_000;

const MiB = 1024 * 1024;
const EICAR_FINDING = /^content\.malicious\.eicar-test-signature$/;
const LANGUAGE_FINDING = /^content\.en\.language\.nsfw\.0$/;
const LIMITS_FINDING = /^content\.malicious\.heuristics\.limits\.exceeded\./;
const MAX_FILES = /^content\.malicious\.heuristics\.limits\.exceeded\.maxfiles$/;
const IMAGE_ERROR = /NSFW_IMAGE/;
const LANGUAGE_ERROR = /NSFW_LANGUAGE/;

/** A gzip member around raw DEFLATE data (RFC 1952); `mtime` makes each one new. */
function gzipOf({ data, crc, size }: Deflated, mtime: number): Buffer {
  const head = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]);
  head.writeUInt32LE(mtime, 4);
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc >>> 0, 0);
  trailer.writeUInt32LE(size % 2 ** 32, 4);
  return Buffer.concat([head, data, trailer]);
}

/** EICAR compressed in a zip: only a scanner that unpacks it sees it. */
function eicarEntry(salt: string) {
  return { name: `eicar-${salt}.com`, data: Buffer.from(eicar()), deflate: true };
}

/** Zips in zips, `depth` archives deep, EICAR compressed in the innermost. */
function nestedEicar(depth: number, salt: string): Buffer {
  let archive = zipArchive([eicarEntry(salt)]);
  for (let level = depth - 1; level > 0; level--) {
    archive = zipStored([{ name: `level${level}.zip`, data: archive }]);
  }
  return archive;
}

/** The middle half of `content` overwritten with random bytes: its header and trailer intact. */
function corrupted(content: Buffer): Buffer {
  const copy = Buffer.from(content);
  const start = Math.floor(copy.length * 0.3);
  const end = Math.floor(copy.length * 0.8);
  randomBytes(end - start).copy(copy, start);
  return copy;
}

/**
 * A lossy WebP whose frame header gives its first partition more bytes than the file has. Random
 * bytes in a WebP's middle are no test: VP8 has no checksum, and libwebp decodes them whole into
 * other pixels (an image examined whole, rightly passed).
 */
function corruptWebp(content: Buffer): Buffer {
  const copy = Buffer.from(content);
  const tag = copy.indexOf('VP8 ', 12, 'latin1') + 8;
  // Frame tag, 24 bits: key frame, version, shown, then the first partition's size (19 bits).
  copy.writeUIntLE((copy.readUIntLE(tag, 3) & 0x1f) | (0x7ffff << 5), tag, 3);
  return copy;
}

/** The entity definitions of "billion laughs": lol9 expands to 10^9 copies of lol0. */
function laughs(): string {
  const lines = [`<!ENTITY lol0 "lol ${LANGUAGE_TEST_MARKER} ">`];
  for (let level = 1; level <= 9; level++) {
    lines.push(`<!ENTITY lol${level} "${`&lol${level - 1};`.repeat(10)}">`);
  }
  return lines.join('\n');
}

export interface CorpusOptions {
  /** What the gzip and zip bombs unpack to, bytes. Default 1 GiB. */
  bombBytes?: number;
  /** What the DOCX bomb's document.xml unpacks to, bytes. Default 300 MiB. */
  docxBombBytes?: number;
}

export interface HostileCorpus {
  /** The items, with new names or bytes where a finding is expected, so no verdict is reused. */
  build(): HostileItem[];
}

/** Prepares what is costly to make once (images, the bombs' compressed data). */
export async function prepareCorpus(options: CorpusOptions = {}): Promise<HostileCorpus> {
  const bombBytes = options.bombBytes ?? 1024 * MiB;
  const docxBombBytes = options.docxBombBytes ?? 300 * MiB;
  const photo = await photoLike(640, 480, 11);
  const png = await sharp(photo).png().toBuffer();
  const gif = await sharp(photo).gif().toBuffer();
  const webp = await sharp(photo).webp().toBuffer();
  const report = pdfWithText(['An ordinary report.']);
  const zeros = deflateRepeated(Buffer.alloc(MiB), Math.ceil(bombBytes / MiB));
  const paragraphs = Buffer.from(paragraphXml('lol lol lol').repeat(1500));
  const docxBomb = (salt: string) =>
    deflateRepeated(
      paragraphs,
      Math.ceil(docxBombBytes / paragraphs.length),
      Buffer.from(DOCUMENT_XML.head),
      Buffer.from(`${paragraphXml(`${LANGUAGE_TEST_MARKER} ${salt}`)}${DOCUMENT_XML.tail}`),
    );
  const pngHuge = pngBomb(100_000, 100_000);
  const pdfLoop = pdfPageTree('loop', 100_000_000);
  const pdfShared = pdfPageTree('shared', 2 ** 27);
  const docxLaughs = docxWithDocumentXml(
    Buffer.from(
      `<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE w:document [\n${laughs()}\n]>` +
        DOCUMENT_XML.head.replace(/^<\?xml[^>]*\?>/, '') +
        `<w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>${DOCUMENT_XML.tail}`,
    ),
  );
  const smallFiles = (count: number) =>
    Array.from({ length: count }, (_, i) => ({
      name: `notes/${String(i).padStart(5, '0')}.txt`,
      data: Buffer.from(`note ${i} ${randomBytes(4).toString('hex')}\n`),
    }));

  return {
    build(): HostileItem[] {
      const salt = randomBytes(6).toString('hex');
      return [
        {
          name: 'polyglot: JPEG and zip (EICAR)',
          content: zipArchive([eicarEntry(salt)], photo),
          expect: { outcome: 'finding', match: EICAR_FINDING },
          why: 'a whole JPEG (the image engine sees a photo) and a whole zip (clamd unpacks it)',
        },
        {
          name: 'polyglot: PDF and zip (EICAR)',
          content: zipArchive([eicarEntry(salt)], report),
          expect: { outcome: 'finding', match: EICAR_FINDING },
          why: 'a whole PDF (the language engine reads it) and a whole zip (clamd unpacks it)',
        },
        {
          name: 'zips nested 5 deep (EICAR)',
          content: nestedEicar(5, salt),
          expect: { outcome: 'finding', match: EICAR_FINDING },
          why: 'within clamd’s MaxRecursion (17): unpacked to the innermost',
        },
        {
          name: 'zips nested 30 deep (EICAR)',
          content: nestedEicar(30, salt),
          expect: { outcome: 'finding', match: LIMITS_FINDING },
          why: 'past MaxRecursion (17): limits.exceeded.maxrecursion (AlertExceedsMax)',
        },
        {
          name: `gzip bomb (${bombBytes / MiB} MiB of zeros)`,
          content: gzipOf(zeros, Number.parseInt(salt.slice(0, 8), 16)),
          expect: { outcome: 'finding', match: LIMITS_FINDING },
          why: 'unpacks past clamd’s MaxFileSize and MaxScanSize: a limits finding',
        },
        {
          name: `zip bomb (${bombBytes / MiB} MiB of zeros)`,
          content: zipArchive([{ name: `zeros-${salt}.bin`, deflated: zeros }]),
          expect: { outcome: 'finding', match: LIMITS_FINDING },
          why: 'an entry cut at MaxFileSize, which is above MaxScanSize: a limits finding',
        },
        {
          name: 'zip of 10,000 small files',
          content: zipStored(smallFiles(10_000)),
          expect: { outcome: 'finding', match: MAX_FILES },
          why: 'clamd’s MaxFiles (10,000) counts the archive too: the last file is not reached',
        },
        {
          name: 'zip of 9,990 small files, EICAR last',
          content: zipArchive([...smallFiles(9_989), eicarEntry(salt)]),
          expect: { outcome: 'finding', match: EICAR_FINDING },
          why: 'within MaxFiles: the last entry is unpacked and scanned',
        },
        ...(
          [
            ['JPEG', photo],
            ['PNG', png],
            ['GIF', gif],
            ['WebP', webp],
          ] as const
        ).flatMap(([format, image]) => [
          {
            name: `${format} cut at 60%`,
            content: image.subarray(0, Math.floor(image.length * 0.6)),
            expect: { outcome: 'error', match: IMAGE_ERROR } as const,
            why: 'part of an image is not the image: the image engine fails (422)',
          },
          {
            name: `${format} corrupt`,
            content: format === 'WebP' ? corruptWebp(image) : corrupted(image),
            expect: { outcome: 'error', match: IMAGE_ERROR } as const,
            why: 'the decoder fails or warns: the image engine fails (422)',
          },
        ]),
        {
          name: 'PNG declaring 100,000 x 100,000',
          content: pngHuge,
          expect: { outcome: 'error', match: /NSFW_IMAGE.*pixels/ },
          why: 'refused from its header, over 100 megapixels (422), never decoded',
        },
        {
          name: 'PDF: /Count 100000000, page tree in a loop',
          content: pdfLoop,
          expect: { outcome: 'error', match: LANGUAGE_ERROR },
          why: 'no page can be read: the language engine fails (422)',
        },
        {
          name: 'PDF: 2^27 pages from a shared page tree',
          content: pdfShared,
          expect: { outcome: 'error', match: LANGUAGE_ERROR },
          why: 'the language engine’s 30-s cap (or its worker’s heap) ends it: 422',
        },
        {
          name: 'JSON nested 1,000,000 deep',
          content: Buffer.from(
            `${'['.repeat(1_000_000)}"${LANGUAGE_TEST_MARKER}","${salt}"${']'.repeat(1_000_000)}`,
          ),
          expect: { outcome: 'finding', match: LANGUAGE_FINDING },
          why: 'read by a linear scan for its strings, never parsed into a tree: the innermost read',
        },
        {
          name: `DOCX bomb (document.xml of ${docxBombBytes / MiB} MiB)`,
          content: docxWithDocumentXml(docxBomb(salt)),
          expect: { outcome: 'unexamined' },
          why: 'clamd’s MaxScanSize (a limits finding) or, where clamd’s limits are higher, the language engine’s 128-MiB unpack limit (422)',
        },
        {
          name: 'DOCX with billion laughs',
          content: docxLaughs,
          expect: { outcome: 'error', match: LANGUAGE_ERROR },
          why: 'mammoth expands no entity: an undefined one is an error (422), neither a bomb nor a pass',
        },
        {
          name: 'XML with billion laughs',
          content: Buffer.from(
            `<?xml version="1.0"?>\n<!-- ${salt} -->\n<!DOCTYPE lolz [\n${laughs()}\n]>\n<lolz>&lol9;</lolz>\n`,
          ),
          expect: { outcome: 'finding', match: LANGUAGE_FINDING },
          why: 'text/xml is read as text, nothing expanded: the marker in the entities is read',
        },
      ];
    },
  };
}

/** What the service answered for an item: its findings, or an error (422, a result's `error`). */
export type Answer =
  | { kind: 'findings'; findings: string[] }
  | { kind: 'error'; error: string }
  | { kind: 'other'; detail: string };

/** Why `answer` is not what `expect` says, or null when it is. */
export function mismatch(expect: Expectation, answer: Answer): string | null {
  if (answer.kind === 'other') return answer.detail;
  if (answer.kind === 'findings' && answer.findings.length === 0) {
    return 'findings: [] for content that must not pass';
  }
  if (expect.outcome === 'unexamined') return null;
  if (expect.outcome === 'finding') {
    if (answer.kind === 'error') return `an error instead of a finding: ${answer.error}`;
    return answer.findings.some((finding) => expect.match.test(finding))
      ? null
      : `findings ${JSON.stringify(answer.findings)}, none matching ${expect.match}`;
  }
  if (answer.kind === 'findings')
    return `findings ${JSON.stringify(answer.findings)}, not an error`;
  return expect.match.test(answer.error) ? null : `error "${answer.error}", not ${expect.match}`;
}

/** The answer of a sync upload (201 or 422) or of a finished async item (GET: 200). */
export function answerOf(status: number, body: unknown): Answer {
  const fields = (typeof body === 'object' && body !== null ? body : {}) as {
    findings?: unknown;
    error?: unknown;
  };
  if ((status === 201 || status === 200) && Array.isArray(fields.findings)) {
    return { kind: 'findings', findings: fields.findings.map(String) };
  }
  if ((status === 422 || status === 200) && typeof fields.error === 'string') {
    return { kind: 'error', error: fields.error };
  }
  return { kind: 'other', detail: `${status} ${JSON.stringify(body).slice(0, 200)}` };
}
