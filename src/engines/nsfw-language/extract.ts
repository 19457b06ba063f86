import mammoth from 'mammoth';
import { getDocumentProxy } from 'unpdf';

export const PDF = 'application/pdf';
export const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
export const JSON_TYPE = 'application/json';
export const HTML = 'text/html';

/** Whether text can be extracted from content of this media type. */
export function isExtractable(contentType: string): boolean {
  return (
    contentType.startsWith('text/') ||
    contentType === JSON_TYPE ||
    contentType === PDF ||
    contentType === DOCX
  );
}

/** Plain text, UTF-8 unless a byte order mark says UTF-16; invalid bytes become U+FFFD. */
function decodeText(content: Uint8Array): string {
  if (content[0] === 0xff && content[1] === 0xfe)
    return new TextDecoder('utf-16le').decode(content);
  if (content[0] === 0xfe && content[1] === 0xff)
    return new TextDecoder('utf-16be').decode(content);
  return new TextDecoder('utf-8').decode(content);
}

/** Every string in a JSON document, keys included, a line each: escapes such as \u0066 resolved. */
function jsonStrings(text: string): string {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    return text; // not quite JSON after all: its text is still worth reading
  }
  // Depth-first with a stack of its own: a deeply nested document must not overflow the call stack.
  const strings: string[] = [];
  const pending: unknown[] = [document];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value === 'string') strings.push(value);
    else if (Array.isArray(value))
      for (let i = value.length - 1; i >= 0; i--) pending.push(value[i]);
    else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value).reverse()) pending.push(item, key);
    }
  }
  return strings.join('\n');
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
const INLINE_TAGS =
  /^(?:a|abbr|b|bdi|bdo|cite|code|del|dfn|em|font|i|ins|kbd|mark|q|s|samp|small|span|strike|strong|sub|sup|u|var|wbr)$/i;

/** The text of an HTML document: no scripts, styles, comments or tags; entities decoded. */
export function htmlText(html: string): string {
  return html
    .replace(/<!--[\s\S]*?-->/g, ' ')
    .replace(/<(script|style|template)\b[\s\S]*?<\/\1\s*>/gi, ' ')
    .replace(/<\/?([a-zA-Z][\w-]*)[^>]*>/g, (_tag, name: string) =>
      INLINE_TAGS.test(name) ? '' : ' ',
    )
    .replace(/&(?:#(\d+)|#x([0-9a-f]+)|([a-z]+));/gi, (entity, decimal, hex, name) => {
      const code = decimal ? Number(decimal) : hex ? Number.parseInt(hex, 16) : Number.NaN;
      if (!Number.isNaN(code)) return code <= 0x10ffff ? String.fromCodePoint(code) : entity;
      return NAMED_ENTITIES[(name as string).toLowerCase()] ?? entity;
    });
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

async function docxText(content: Uint8Array): Promise<string> {
  try {
    const { value } = await mammoth.extractRawText({ buffer: Buffer.from(content) });
    return value;
  } catch (error) {
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
 * The text a reader sees in the content. Throws when the content cannot be read or its text is
 * longer than `maxChars` (examining part of it would be a silent pass for the rest).
 */
export async function extractText(
  content: Uint8Array,
  contentType: string,
  maxChars: number,
): Promise<string> {
  let text: string;
  if (contentType === PDF) text = await pdfText(content, maxChars);
  else if (contentType === DOCX) text = await docxText(content);
  else if (contentType === JSON_TYPE) text = jsonStrings(decodeText(content));
  else if (contentType === HTML) text = htmlText(decodeText(content));
  else if (contentType.startsWith('text/')) text = decodeText(content);
  else throw new Error(`no text extraction for ${contentType}`);
  text = text.replace(INVISIBLE, '');
  if (text.length > maxChars) throw new TextTooLongError(maxChars);
  return text;
}
