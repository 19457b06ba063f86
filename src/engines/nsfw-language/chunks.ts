// How the language detector cuts text: chunks between spaces, tokens inside chunks, and which
// chunks are data (hashes, encoded data, identifiers) rather than words.

/** The first code unit folded (NFKC is asked only from here on: Latin letters stay as they are). */
const FOLD_FROM = 0x250;

/** Each BMP code unit's folded form, and the units that have one as a character class. */
interface Folding {
  folded: Uint16Array;
  pattern: RegExp;
}
let folding: Folding | null = null;

/**
 * NFKC of each code unit alone (a lone surrogate too: NFKC leaves those as they are), kept where
 * it is one other unit; built at first use, ~30 ms, instead of NFKC per character of every text.
 */
function foldingTable(): Folding {
  if (folding !== null) return folding;
  const folded = new Uint16Array(0x10000);
  const hex = (code: number) => `\\u${code.toString(16).padStart(4, '0')}`;
  let ranges = '';
  let first = -1;
  for (let code = FOLD_FROM; code <= 0x10000; code++) {
    let form = code;
    if (code < 0x10000) {
      const normal = String.fromCharCode(code).normalize('NFKC');
      if (normal.length === 1) form = normal.charCodeAt(0);
      folded[code] = form;
    }
    if (form !== code && first < 0) first = code;
    if (form === code && first >= 0) {
      ranges += `${hex(first)}-${hex(code - 1)}`;
      first = -1;
    }
  }
  folding = { folded, pattern: new RegExp(`[${ranges}]`, 'g') };
  return folding;
}

/**
 * Compatibility characters (full-width letters, ligature-free forms) folded to their plain form
 * where that keeps the length, so offsets stay those of the text. Latin letters are left as they
 * are. Only the units that fold are matched (NFKC per character of the whole range cost ~60 ms a
 * MB of CJK or binary text); text with none is returned as it is.
 */
export function foldCompatibilityForms(text: string): string {
  const { folded, pattern } = foldingTable();
  return text.replace(pattern, (char) => String.fromCharCode(folded[char.charCodeAt(0)] as number));
}

export const SPACE = 0;
/** Letters, digits and the symbols that can stand for letters: what tokens are made of. */
export const TOKEN = 1;
const OTHER = 2;
const ASCII_KINDS = new Uint8Array(128).map((_, code) => {
  const char = String.fromCharCode(code);
  if (/\s/.test(char)) return SPACE;
  return /[A-Za-z0-9@$!|+*#%]/.test(char) ? TOKEN : OTHER;
});
const kindCache = new Map<number, number>();

export function kindOf(code: number): number {
  if (code < 0x80) return ASCII_KINDS[code] as number;
  let kind = kindCache.get(code);
  if (kind === undefined) {
    const char = String.fromCharCode(code);
    if (code >= 0xd800 && code <= 0xdfff) kind = OTHER;
    else if (/\s/u.test(char)) kind = SPACE;
    else kind = /[\p{L}\p{M}€¢]/u.test(char) ? TOKEN : OTHER;
    kindCache.set(code, kind);
  }
  return kind;
}

/**
 * Whether letters are in mixed case, as random strings are and words are not: a capital after a
 * letter or digit, with small letters too ("fUcK", "xR4bQz", "McDonald"; not "Fuck", "FUCK").
 */
export function mixedCase(text: string, start: number, end: number): boolean {
  let small = false;
  let capitalInside = false;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if (code >= 97 && code <= 122) small = true;
    else if (code >= 65 && code <= 90 && index > start) {
      const before = text.charCodeAt(index - 1) | 0x20;
      if ((before >= 97 && before <= 122) || (before >= 48 && before <= 57)) capitalInside = true;
    }
    if (small && capitalInside) return true;
  }
  return false;
}

function isAlphanumeric(code: number): boolean {
  return (code >= 48 && code <= 57) || ((code | 0x20) >= 97 && (code | 0x20) <= 122);
}

/**
 * Whether a chunk of text between spaces is data or code rather than words (none of its tokens
 * is read): hexadecimal with a digit (hashes, UUIDs, "a55c5"); 16 or more letters and digits with
 * two digits or more (base64, keys); a digit in mixed case ("Ni9G479tmegk"); several tokens with
 * one of letters and digits or in mixed case ("piss/qrf5en+", "jIz/MSOveS"); an identifier with
 * underscores ("GPG_ERR_ASS_CANCELED", but "f_u_c_k" is letters spelt apart); an e-mail address;
 * a file name or pattern ("src/slutty.c", "*.ass").
 */
export function isData(text: string, start: number, end: number): boolean {
  if (text.startsWith('*.', start)) return true;
  let letters = 0;
  let digits = 0;
  let hex = true;
  let tokens = 0;
  let tokenLength = 0;
  let longToken = false;
  let tokenLetters = false;
  let tokenDigits = false;
  let alphanumericToken = false;
  let underscore = false;
  let at = false;
  let dot = false;
  let previousKind = SPACE;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    const kind = kindOf(code);
    if (kind === TOKEN && previousKind !== TOKEN) {
      tokens++;
      tokenLength = 0;
      tokenLetters = false;
      tokenDigits = false;
    }
    previousKind = kind;
    if (kind === TOKEN && ++tokenLength > 1) longToken = true;
    if (index > start && index + 1 < end) {
      const before = text.charCodeAt(index - 1);
      const after = text.charCodeAt(index + 1);
      if (code === 95 && kindOf(before) === TOKEN && kindOf(after) === TOKEN) underscore = true;
      if (code === 64 && isAlphanumeric(before) && isAlphanumeric(after)) at = true;
      // An e-mail address: a dot after the @, then a letter ("dick.dunbar@siebel.com").
      if (code === 46 && at && (after | 0x20) >= 97 && (after | 0x20) <= 122) return true;
      if (code === 46) dot = true;
    }
    if (code >= 48 && code <= 57) {
      digits++;
      tokenDigits = true;
    } else if ((code | 0x20) >= 97 && (code | 0x20) <= 122) {
      letters++;
      tokenLetters = true;
      if ((code | 0x20) > 102) hex = false;
    } else if (code >= 0x80 && kind === TOKEN) {
      letters++; // a letter of another script (or € and ¢, rare enough)
      tokenLetters = true;
      hex = false;
    }
    if (tokenLetters && tokenDigits) alphanumericToken = true;
  }
  if (hex && digits > 0 && letters + digits >= 3) return true;
  if (letters + digits >= 16 && digits >= 2 && letters > 0) return true;
  if (longToken && (underscore || (dot && isFileName(text, start, end)))) return true;
  const mixed = mixedCase(text, start, end);
  return (digits > 0 && mixed) || (tokens > 1 && (alphanumericToken || mixed));
}

function isSmallLetterOrDigit(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 48 && code <= 57);
}

/** Whether a chunk ends like a file name: a dot, then one to four small letters or digits. */
function isFileName(text: string, start: number, end: number): boolean {
  let last = end;
  while (last > start && end - last < 4 && ')]:;,\'"'.includes(text[last - 1] as string)) last--;
  let extension = last;
  while (
    extension > start &&
    last - extension < 5 &&
    isSmallLetterOrDigit(text.charCodeAt(extension - 1))
  ) {
    extension--;
  }
  return (
    last - extension >= 1 &&
    last - extension <= 4 &&
    extension - 1 > start &&
    text[extension - 1] === '.' &&
    kindOf(text.charCodeAt(extension - 2)) === TOKEN
  );
}

/** Whether a token is written as a name: a capital, then small letters only ("Dick", "K"). */
export function isTitlecase(text: string, start: number, end: number): boolean {
  const first = text[start] as string;
  if (first === first.toLowerCase() || first !== first.toUpperCase()) return false;
  const rest = text.slice(start + 1, end);
  return rest === rest.toLowerCase() && !/[^\p{L}]/u.test(rest);
}

const NOT_HEX = 0;
const HEX_LETTERS = 1;
const HEX_LETTERS_AND_DIGITS = 2;

/** Whether a chunk is hexadecimal letters only ("caccaaa"), letters and digits ("6de6877"), or neither. */
function hexShape(text: string, start: number, end: number): number {
  let digits = false;
  let letters = false;
  for (let index = start; index < end; index++) {
    const code = text.charCodeAt(index);
    if (code >= 48 && code <= 57) digits = true;
    else if ((code | 0x20) >= 97 && (code | 0x20) <= 102) letters = true;
    else return NOT_HEX;
  }
  return letters ? (digits ? HEX_LETTERS_AND_DIGITS : HEX_LETTERS) : NOT_HEX;
}

/** Whether the chunk at start..end is `length` long and hexadecimal with digits (a hash). */
function isHashOfLength(text: string, start: number, end: number, length: number): boolean {
  return end - start === length && hexShape(text, start, end) === HEX_LETTERS_AND_DIGITS;
}

function chunkEndFrom(text: string, index: number): number {
  let end = index;
  while (end < text.length && kindOf(text.charCodeAt(end)) !== SPACE) end++;
  return end;
}

function nextChunkStart(text: string, index: number): number {
  let start = index;
  while (start < text.length && kindOf(text.charCodeAt(start)) === SPACE) start++;
  return start;
}

/**
 * Calls `visit` for each token of the text, in order, with whether its chunk is data. A token is
 * a run of letters, digits and look-alike symbols; a chunk, a run of anything but spaces.
 * A chunk of hexadecimal letters only is data beside a hexadecimal chunk of its length with
 * digits: one short hash in a thousand has no digit ("6de6877 caccaaa c050bb1"), and read
 * alone it may stretch into a word.
 */
export function forEachToken(
  text: string,
  visit: (start: number, end: number, data: boolean) => void,
): void {
  // The chunk before (empty before the first).
  let previousStart = 0;
  let previousEnd = 0;
  let index = nextChunkStart(text, 0);
  while (index < text.length) {
    const chunkEnd = chunkEndFrom(text, index);
    let data = isData(text, index, chunkEnd);
    if (!data && hexShape(text, index, chunkEnd) === HEX_LETTERS) {
      // Each neighbour is read once more at most: linear.
      const length = chunkEnd - index;
      const next = nextChunkStart(text, chunkEnd);
      data =
        isHashOfLength(text, previousStart, previousEnd, length) ||
        isHashOfLength(text, next, chunkEndFrom(text, next), length);
    }
    for (let start = index; start < chunkEnd; ) {
      if (kindOf(text.charCodeAt(start)) !== TOKEN) {
        start++;
        continue;
      }
      let end = start;
      while (end < chunkEnd && kindOf(text.charCodeAt(end)) === TOKEN) end++;
      visit(start, end, data);
      start = end;
    }
    previousStart = index;
    previousEnd = chunkEnd;
    index = nextChunkStart(text, chunkEnd);
  }
}
