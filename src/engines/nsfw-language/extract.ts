import mammoth from 'mammoth';
import { getDocumentProxy } from 'unpdf';

import { DOCX, HTML, JSON_TYPE, PDF } from './extractable.js';
import { checkUnpackedSize, UnpackedTooLargeError } from './unpacked-size.js';

export { DOCX, HTML, isExtractable, JSON_TYPE, PDF } from './extractable.js';

/** Plain text, UTF-8 unless a byte order mark says UTF-16; invalid bytes become U+FFFD. */
function decodeText(content: Uint8Array): string {
  if (content[0] === 0xff && content[1] === 0xfe)
    return new TextDecoder('utf-16le').decode(content);
  if (content[0] === 0xfe && content[1] === 0xff)
    return new TextDecoder('utf-16be').decode(content);
  return new TextDecoder('utf-8').decode(content);
}

/** What may stand between a JSON document's strings: structure, numbers, literals, white space. */
const JSON_OUTSIDE_STRINGS = /^[\s[\]{},:0-9.eE+\-truefalsn]*$/;

/**
 * Every string in a JSON document, keys included, a line each, escapes such as \u0066 resolved.
 * Read by one scan for string literals, never by parsing the whole document: a tree of millions of
 * empty arrays costs a worker hundreds of MB (and a fatal out-of-memory can take the process with
 * it), while the literals alone cost no more than the text. Text with anything but JSON between its
 * strings is not quite JSON after all, and is read whole.
 */
function jsonStrings(text: string): string {
  const strings: string[] = [];
  let outside = '';
  let position = 0;
  while (position < text.length) {
    const open = text.indexOf('"', position);
    if (open === -1) {
      outside += text.slice(position);
      break;
    }
    outside += text.slice(position, open);
    let close = open + 1;
    // Past escaped characters (\" included) to the closing quote.
    while (close < text.length && text[close] !== '"') close += text[close] === '\\' ? 2 : 1;
    if (close >= text.length) return text;
    try {
      strings.push(JSON.parse(text.slice(open, close + 1)) as string);
    } catch {
      return text; // an invalid literal (a raw control character, a bad escape)
    }
    position = close + 1;
    // The residue is checked as it grows, so it never holds more than a little of the text.
    if (outside.length > 4096) {
      if (!JSON_OUTSIDE_STRINGS.test(outside)) return text;
      outside = '';
    }
  }
  return JSON_OUTSIDE_STRINGS.test(outside) ? strings.join('\n') : text;
}

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
  shy: '',
};

/** Tags inside a word's letters in practice ("f<b>u</b>ck"): removed without a space. */
const INLINE_TAGS = new Set(
  'a abbr b bdi bdo cite code del dfn em font i ins kbd mark q s samp small span strike strong sub sup u var wbr'.split(
    ' ',
  ),
);

// Sticky patterns, tried at one `<` or `&` each: a literal or one character class per quantifier,
// so each attempt is linear in what it reads, and the scanner below never reads a character twice
// but through a remembered search.
const RAW_TEXT_ELEMENT = /<(script|style|template)\b/iy;
const TAG_NAME = /<\/?([a-zA-Z][\w-]*)/y;
const ENTITY = /&(?:#(\d+)|#x([0-9a-f]+)|([a-z]+));/iy;

/**
 * Where `find` next matches at or after a position, remembered: a later search from a position
 * between the last one and its answer has the same answer (after "none", none). So searching
 * again from each of many openings that are never closed costs one pass in all, not one each.
 */
class NextMatch {
  private searchedFrom = -1;
  private found: { at: number; end: number } | null = null;

  constructor(private readonly find: (from: number) => { at: number; end: number } | null) {}

  next(from: number): { at: number; end: number } | null {
    const known =
      this.searchedFrom !== -1 &&
      from >= this.searchedFrom &&
      (this.found === null || from <= this.found.at);
    if (!known) {
      this.searchedFrom = from;
      this.found = this.find(from);
    }
    return this.found;
  }
}

function indexOfAfter(text: string, literal: string) {
  return (from: number) => {
    const at = text.indexOf(literal, from);
    return at === -1 ? null : { at, end: at + literal.length };
  };
}

function closingTag(text: string, name: string) {
  const pattern = new RegExp(`</${name}\\s*>`, 'gi');
  return (from: number) => {
    pattern.lastIndex = from;
    const match = pattern.exec(text);
    return match === null ? null : { at: match.index, end: match.index + match[0].length };
  };
}

function decodeEntity(
  decimal: string | undefined,
  hex: string | undefined,
  name: string | undefined,
) {
  const code = decimal ? Number(decimal) : hex ? Number.parseInt(hex, 16) : Number.NaN;
  if (!Number.isNaN(code)) return code <= 0x10ffff ? String.fromCodePoint(code) : null;
  return NAMED_ENTITIES[(name ?? '').toLowerCase()] ?? null;
}

/**
 * The text of an HTML document: no scripts, styles, comments or tags; entities decoded. One pass
 * (the content is untrusted and up to the engine's size limit): an unclosed comment, script or tag
 * stays as text, as before, and costs one search in all however often it is opened.
 */
export function htmlText(html: string): string {
  const nextLt = new NextMatch(indexOfAfter(html, '<'));
  const nextAmp = new NextMatch(indexOfAfter(html, '&'));
  const commentEnd = new NextMatch(indexOfAfter(html, '-->'));
  const tagEnd = new NextMatch(indexOfAfter(html, '>'));
  const rawTextEnds = new Map<string, NextMatch>();
  const out: string[] = [];
  let copied = 0; // html[copied, i) is text still to be copied out
  let i = 0;
  const skip = (to: number, replacement: string) => {
    out.push(html.slice(copied, i), replacement);
    i = to;
    copied = to;
  };
  while (i < html.length) {
    const lt = nextLt.next(i)?.at ?? -1;
    const amp = nextAmp.next(i)?.at ?? -1;
    if (lt === -1 && amp === -1) break;
    i = lt === -1 ? amp : amp === -1 ? lt : Math.min(lt, amp);
    if (html[i] === '&') {
      ENTITY.lastIndex = i;
      const entity = ENTITY.exec(html);
      const decoded = entity === null ? null : decodeEntity(entity[1], entity[2], entity[3]);
      if (entity !== null && decoded !== null) skip(i + entity[0].length, decoded);
      else i++;
      continue;
    }
    if (html.startsWith('<!--', i)) {
      const end = commentEnd.next(i + 4);
      if (end !== null) {
        skip(end.end, ' ');
        continue;
      }
    }
    RAW_TEXT_ELEMENT.lastIndex = i;
    const raw = RAW_TEXT_ELEMENT.exec(html);
    if (raw !== null) {
      const name = (raw[1] ?? '').toLowerCase();
      let ends = rawTextEnds.get(name);
      if (ends === undefined) {
        ends = new NextMatch(closingTag(html, name));
        rawTextEnds.set(name, ends);
      }
      const end = ends.next(i + raw[0].length);
      if (end !== null) {
        skip(end.end, ' ');
        continue;
      }
    }
    TAG_NAME.lastIndex = i;
    const tag = TAG_NAME.exec(html);
    if (tag !== null) {
      const end = tagEnd.next(i + tag[0].length);
      if (end !== null) {
        skip(end.end, INLINE_TAGS.has((tag[1] ?? '').toLowerCase()) ? '' : ' ');
        continue;
      }
    }
    i++;
  }
  out.push(html.slice(copied));
  return out.join('');
}

async function pdfText(content: Uint8Array, maxChars: number): Promise<string> {
  let document: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    document = await getDocumentProxy(content, { verbosity: 0 });
  } catch (error) {
    throw new Error(`cannot read the PDF: ${error instanceof Error ? error.message : error}`);
  }
  try {
    const pages: string[] = [];
    let length = 0;
    for (let number = 1; number <= document.numPages; number++) {
      const page = await document.getPage(number);
      const { items } = await page.getTextContent();
      const text = items
        .map((item) => ('str' in item ? item.str + (item.hasEOL ? '\n' : '') : ''))
        .join('');
      page.cleanup();
      length += text.length;
      if (length > maxChars) throw new TextTooLongError(maxChars);
      pages.push(text);
    }
    return pages.join('\n');
  } finally {
    await document.loadingTask.destroy();
  }
}

/**
 * What a DOCX's parts may unpack to, all together. mammoth holds each part it reads whole, outside
 * the worker's heap limit, and its tree of a part costs about 100 bytes of heap per byte (13 MiB
 * of document.xml filled the 1 GB heap): past this a document could not be examined anyway.
 */
export const DOCX_MAX_UNPACKED_BYTES = 128 * 1024 * 1024;

async function docxText(content: Uint8Array, maxUnpackedBytes: number): Promise<string> {
  const buffer = Buffer.from(content.buffer, content.byteOffset, content.byteLength);
  try {
    await checkUnpackedSize(buffer, maxUnpackedBytes);
    const { value } = await mammoth.extractRawText({ buffer });
    return value;
  } catch (error) {
    if (error instanceof UnpackedTooLargeError) throw error;
    throw new Error(`cannot read the DOCX: ${error instanceof Error ? error.message : error}`);
  }
}

export class TextTooLongError extends Error {
  constructor(maxChars: number) {
    super(`its text is longer than the ${maxChars} characters examined`);
  }
}

/** Invisible characters that split a word without showing: soft hyphen, zero-width marks. */
const INVISIBLE = /[\u00ad\u200b-\u200d\u2060\ufeff]/g;

/**
 * The text a reader sees in the content. Throws when the content cannot be read, its text is
 * longer than `maxChars` (examining part of it would be a silent pass for the rest) or, for a
 * DOCX, its parts unpack to more than `maxUnpackedBytes`.
 */
export async function extractText(
  content: Uint8Array,
  contentType: string,
  maxChars: number,
  maxUnpackedBytes = DOCX_MAX_UNPACKED_BYTES,
): Promise<string> {
  let text: string;
  if (contentType === PDF) text = await pdfText(content, maxChars);
  else if (contentType === DOCX) text = await docxText(content, maxUnpackedBytes);
  else if (contentType === JSON_TYPE) text = jsonStrings(decodeText(content));
  else if (contentType === HTML) text = htmlText(decodeText(content));
  else if (contentType.startsWith('text/')) text = decodeText(content);
  else throw new Error(`no text extraction for ${contentType}`);
  text = text.replace(INVISIBLE, '');
  if (text.length > maxChars) throw new TextTooLongError(maxChars);
  return text;
}
