/**
 * Media types of UTF-8 text by rules that give libmagic's answers for the text formats it names.
 * libmagic's text magic is hundreds of regular expressions: 4-9 ms of CPU for a few KB of prose.
 *
 * Every rule sees untrusted bytes, so every rule runs in linear time over a bounded window: a
 * literal prefix, an `indexOf` scan, a hand-written scanner, or an anchored regular expression in
 * which no two quantifiers can share characters (so there is one way to split any text, and no
 * backtracking blow-up). Each rule's window is its own documented bound, and the text itself is at
 * most TEXT_SNIFF_BYTES. test/engines/text-type-linear.test.ts times every path on hostile input.
 */

/** Text is classified from its first 64 KiB (the bound of every path below). */
export const TEXT_SNIFF_BYTES = 64 * 1024;

/**
 * True for UTF-8 (or ASCII) text: no NUL, no control characters but tab, newline, form feed,
 * carriage return and ESC (terminal output), and valid UTF-8 (a character cut at the end is fine).
 */
export function isUtf8Text(head: Buffer): boolean {
  const sample = head.subarray(0, TEXT_SNIFF_BYTES);
  for (const byte of sample) {
    if (byte === 0x7f) return false;
    if (
      byte < 0x20 &&
      byte !== 0x09 &&
      byte !== 0x0a &&
      byte !== 0x0c &&
      byte !== 0x0d &&
      byte !== 0x1b
    ) {
      return false;
    }
  }
  try {
    // stream: true holds back an incomplete last character instead of failing on it.
    new TextDecoder('utf-8', { fatal: true }).decode(sample, { stream: true });
    return true;
  } catch {
    return false;
  }
}

/** A magic rule over the start of the text (after a byte order mark, before any trimming). */
export interface TextRule {
  name: string;
  type: string;
  /** The rule reads at most this many characters: its bound on untrusted input. */
  window: number;
  matches(text: string): boolean;
}

/** A rule for a literal opening, as libmagic's `0 string` rules. */
function opening(name: string, prefix: string, type: string): TextRule {
  return { name, type, window: prefix.length, matches: (text) => text.startsWith(prefix) };
}

/** An anchored regular expression whose quantifiers cannot share characters. */
function anchored(name: string, pattern: RegExp, type: string, window: number): TextRule {
  return { name, type, window, matches: (text) => pattern.test(text) };
}

/** libmagic's names for PEM blocks by their label; other labels are plain text to it. */
const PEM_TYPES: Record<string, string> = {
  CERTIFICATE: 'application/x-pem-file',
  'CERTIFICATE REQUEST': 'application/x-pem-file',
  'DSA PRIVATE KEY': 'application/x-pem-file',
  'EC PRIVATE KEY': 'application/x-pem-file',
  'OPENSSH PRIVATE KEY': 'application/x-pem-file',
  'PRIVATE KEY': 'text/x-ssh-private-key',
  'RSA PRIVATE KEY': 'text/x-ssl-private-key',
  'PUBLIC KEY': 'text/x-ssh-public-key',
  'RSA PUBLIC KEY': 'text/x-ssl-public-key',
  'PGP PUBLIC KEY BLOCK': 'application/pgp-keys',
  'PGP MESSAGE': 'application/pgp-encrypted',
};

/** `-----BEGIN <label>-----` at the start, one literal each. */
const PEM_RULES: TextRule[] = Object.entries(PEM_TYPES).map(([label, type]) =>
  opening(`pem ${label}`, `-----BEGIN ${label}-----`, type),
);

/** libmagic searches `<svg` from offset 19 over 4096 bytes: a start at 19..4115 matches. */
const SVG_SEARCH_FROM = 19;
const SVG_SEARCH_TO = SVG_SEARCH_FROM + 4096;
/** libmagic's regex tests read up to 8 KiB: here, the version number after `version=`. */
const XML_VERSION_WINDOW = 8192;

/**
 * libmagic's SVG rule: `<?xml version=` at the start, a version number (a digit or dot) after it,
 * and `<svg` (case-sensitive) starting within the 4 KB after offset 19. An `indexOf` scan each.
 */
function isSvgByDeclaration(text: string): boolean {
  const declaration = '<?xml version=';
  if (!text.startsWith(declaration)) return false;
  const version = text.slice(declaration.length, declaration.length + XML_VERSION_WINDOW);
  if (!/[0-9.]/.test(version)) return false;
  const svg = text.indexOf('<svg', SVG_SEARCH_FROM);
  return svg !== -1 && svg <= SVG_SEARCH_TO;
}

/** libmagic searches `<!doctype svg` (any case, any white space between) in the first 4 KB. */
const DOCTYPE_SEARCH_TO = 4096;
/** White space between `doctype` and `svg` is read up to this far past the search window. */
const DOCTYPE_WINDOW = DOCTYPE_SEARCH_TO + 1024;
/** One literal, one run of ASCII white space, one literal: each `<` starts at most one attempt. */
const SVG_DOCTYPE = /<!doctype[\t\n\v\f\r ]+svg/i;

function hasSvgDoctype(text: string): boolean {
  const at = text.search(SVG_DOCTYPE);
  return at !== -1 && at < DOCTYPE_SEARCH_TO;
}

/**
 * libmagic's rules at the start of the text, in its order and with its names. `windows` bound what
 * each reads; the shebang and header patterns are anchored, and their quantifiers are over
 * disjoint character classes (`\s*\S*`) or end at a literal, so they backtrack at most once over
 * their window.
 */
export const TEXT_RULES: readonly TextRule[] = [
  // Deliberately anchored (libmagic searches 1 KB): text that mentions %PDF- is not a PDF for
  // the language engine, which would fail to read it.
  anchored('pdf', /^[\t\n\f\r ]{0,1024}%PDF-/, 'application/pdf', 1024 + 5),
  opening('rtf', '{\\rtf', 'text/rtf'),
  opening('postscript', '%!PS', 'application/postscript'),
  opening('binhex', '(This file must be converted with BinHex', 'application/mac-binhex40'),
  ...PEM_RULES,
  {
    name: 'svg-declaration',
    type: 'image/svg+xml',
    window: XML_VERSION_WINDOW + 16,
    matches: isSvgByDeclaration,
  },
  { name: 'svg-doctype', type: 'image/svg+xml', window: DOCTYPE_WINDOW, matches: hasSvgDoctype },
  opening('svg', '<svg', 'image/svg+xml'),
  { name: 'xml', type: 'text/xml', window: 5, matches: (text) => text.toLowerCase() === '<?xml' },
  anchored('python', /^#!\s*\S*\/(?:env\s+)?python[0-9.]*\b/, 'text/x-script.python', 256),
  anchored('shell', /^#!\s*\S*\/(?:env\s+)?(?:ba|z|k|da)?sh\b/, 'text/x-shellscript', 256),
  anchored('perl', /^#!\s*\S*\/(?:env\s+)?perl\b/, 'text/x-perl', 256),
  anchored('node', /^#!\s*\S*\/(?:env\s+)?(?:node|nodejs)\b/, 'text/javascript', 256),
  anchored('ruby', /^#!\s*\S*\/(?:env\s+)?ruby\b/, 'text/x-ruby', 256),
  anchored('vcard', /^BEGIN:VCARD\r?\n/i, 'text/vcard', 16),
  anchored('calendar', /^BEGIN:VCALENDAR\r?\n/i, 'text/calendar', 16),
  anchored('mbox', /^From \S/, 'application/mbox', 8),
  anchored(
    'mail',
    /^(?:From|Received|Relay-Version|Path|Xref):|^(?:delivered-to|return-path):/i,
    'message/rfc822',
    16,
  ),
];

/** libmagic looks for these anywhere in the first 4 KB to call text HTML. */
export const HTML_WINDOW = 4096;
const HTML_TAGS = /<(?:!doctype html|html|head[\s>]|title>|script|style|table|a href=)/i;

/** Literal alternatives after `<`: each `<` is one attempt of bounded length. */
export function looksLikeHtml(text: string): boolean {
  return HTML_TAGS.test(text.slice(0, HTML_WINDOW));
}

/**
 * libmagic's JSON check: the whole document parses (JSON.parse is linear and not recursive); a
 * document larger than the head: it opens like JSON.
 */
export function isJson(text: string, complete: boolean): boolean {
  const first = text[0];
  if (first !== '[' && first !== '{') return false;
  if (!complete) return /^(?:\{\s*"|\[\s*[[{"\d-])/.test(text.slice(0, 1024));
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** libmagic's CSV check reads up to this many lines. */
const CSV_LINES = 10;

/**
 * libmagic's CSV check (is_csv.c), ported as the scanner it is: the first lines (at least two, up
 * to ten) have the same number of commas, outside double quotes; a quote runs to its closing quote
 * (`""` escapes one), across lines; ten lines need two commas each (as the libmagic we ship says).
 * One pass, each character once.
 */
export function isCsv(text: string): boolean {
  let fields = 0;
  let lineFields = 0;
  let lines = 0;
  let i = 0;
  while (i < text.length) {
    const char = text[i++];
    if (char === '"') {
      // Eat the quoted text: up to a quote that is not followed by another quote.
      for (;;) {
        const close = text.indexOf('"', i);
        i = close === -1 ? text.length : close + 1; // an open quote eats the rest
        if (close === -1) break;
        if (text[i] !== '"') break;
        i++;
      }
    } else if (char === ',') {
      fields++;
    } else if (char === '\n') {
      lines++;
      if (lines === CSV_LINES) return lineFields > 1 && lineFields === fields;
      if (lineFields === 0) {
        if (fields === 0) return false;
        lineFields = fields;
      } else if (lineFields !== fields) {
        return false;
      }
      fields = 0;
    }
  }
  return lineFields !== 0 && lines >= 2;
}

/**
 * Media type of UTF-8 text. libmagic checks JSON and CSV before its magic, then the magic at the
 * start of the text, then HTML tags; source code it would name by language stays text/plain.
 */
export function classifyText(head: Buffer, complete: boolean): string {
  const whole = head.subarray(0, TEXT_SNIFF_BYTES).toString('utf8');
  const text = whole.charCodeAt(0) === 0xfeff ? whole.slice(1) : whole;
  const trimmed = text.trimStart();
  if (isJson(trimmed, complete && head.length <= TEXT_SNIFF_BYTES)) return 'application/json';
  if (isCsv(text)) return 'text/csv';
  for (const rule of TEXT_RULES) if (rule.matches(text.slice(0, rule.window))) return rule.type;
  if (looksLikeHtml(trimmed)) return 'text/html';
  return 'text/plain';
}
