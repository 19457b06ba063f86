/**
 * A multipart part's headers as busboy reads them (see multipart-reader.ts): the fields of a
 * header block, `token; key=value` values with RFC 2231/5987 parameters, and text in a charset.
 * Every loop here walks its input once; a block is at most MAX_PART_HEADER_BYTES.
 */

export interface PartHeaders {
  name: string;
  filename: string | undefined;
  file: boolean;
  charset: string;
}

/** What a header block says of its part; null for a part to skip. */
export function describePart(block: Buffer): PartHeaders | null {
  const headers = headerLines(block.toString('latin1'));
  const dispositionText = headers.get('content-disposition');
  if (dispositionText === undefined) return null;
  const disposition = headerValue(dispositionText);
  if (disposition.token.toLowerCase() !== 'form-data') return null;
  let name: string | undefined;
  let filename: string | undefined;
  for (const [key, value] of disposition.parameters) {
    if (hasLineBreak(value) && (key === 'name' || key === 'filename')) return null;
    if (key === 'name') name = value;
    else if (key === 'filename') filename = value;
  }
  let mediaType = 'text/plain';
  let charset = 'utf-8';
  const contentType = headers.get('content-type');
  if (contentType !== undefined && contentType.length > 0) {
    const { token, parameters } = headerValue(contentType);
    if (token !== '') mediaType = token.toLowerCase();
    const declared = parameters.find(([key]) => key === 'charset');
    if (declared !== undefined) charset = declared[1].toLowerCase();
  }
  return {
    name: name ?? '',
    filename: filename === undefined ? undefined : lastSegment(filename),
    file: filename !== undefined || mediaType === 'application/octet-stream',
    charset,
  };
}

function hasLineBreak(value: string): boolean {
  return value.includes('\r') || value.includes('\n');
}

/**
 * A header block's fields, by lower-case name, the first value of each: read line by line to the
 * end or the first line that is not a field (busboy's HeaderParser reads the same).
 */
function headerLines(block: string): Map<string, string> {
  const fields = new Map<string, string[]>();
  let last: string[] | undefined;
  for (const line of block.split('\r\n')) {
    if (line === '') continue;
    if (line.includes('\r') || line.includes('\n')) break;
    if ((line[0] === ' ' || line[0] === '\t') && last !== undefined) {
      // A folded line continues the last field (RFC 5322: the CRLF goes, the space stays).
      last[last.length - 1] += line;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) break;
    const name = line.slice(0, colon).toLowerCase();
    let value = line.slice(colon + 1);
    if (value[0] === ' ' || value[0] === '\t') value = value.slice(1);
    last = fields.get(name) ?? [];
    last.push(value);
    fields.set(name, last);
  }
  return new Map([...fields].map(([name, values]) => [name, values[0] as string]));
}

/** A header value read as `token; key=value; ...`: the leading token, then keyed parameters. */
interface HeaderValue {
  token: string;
  /** Lower-case keys with their values, in order (a later key does not replace an earlier). */
  parameters: Array<[string, string]>;
}

enum ParameterState {
  Key,
  Charset,
  Language,
  Value,
}

/**
 * A header value's token and parameters, as busboy reads them (RFC 2045 with RFC 2231/5987
 * extended values), one character at a time: blanks outside quotes are dropped, a quote opens or
 * closes a quoted run wherever it stands (and what follows a closing one up to `;` is dropped),
 * `\"` and `\\` stand for the character in quotes, plain values are read as UTF-8 and
 * `key*=charset'language'%XX` values in their charset. A token without `=` is no parameter.
 */
export function headerValue(text: string): HeaderValue {
  const items: Array<string | [string, string]> = [];
  let key: string | null = null;
  let state = ParameterState.Key;
  let charset = '';
  let quoted = false;
  let escaping = false;
  let current = '';
  const finish = () => {
    let value = current;
    if (charset !== '') {
      if (value.length > 0) value = decodeText(percentDecoded(value), charset.toLowerCase());
    } else if (value.length > 0) {
      value = utf8Of(value);
    }
    items.push(key === null ? value : [key, value]);
    key = null;
    charset = '';
    current = '';
  };
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (char === '\\' && quoted) {
      if (!escaping) {
        escaping = true;
        continue;
      }
      escaping = false;
    } else if (char === '"') {
      if (!escaping) {
        if (quoted) {
          quoted = false;
          state = ParameterState.Key;
          while (i + 1 < text.length && text[i + 1] !== ';') i += 1;
        } else quoted = true;
        continue;
      }
      escaping = false;
    } else {
      if (escaping && quoted) current += '\\';
      escaping = false;
      if ((state === ParameterState.Charset || state === ParameterState.Language) && char === "'") {
        if (state === ParameterState.Charset) {
          state = ParameterState.Language;
          charset = current.slice(1); // what followed `*`, its `=` included
        } else state = ParameterState.Value;
        current = '';
        continue;
      }
      if (state === ParameterState.Key && (char === '*' || char === '=') && items.length > 0) {
        state = char === '*' ? ParameterState.Charset : ParameterState.Value;
        key = current.toLowerCase();
        current = '';
        continue;
      }
      if (!quoted && char === ';') {
        state = ParameterState.Key;
        finish();
        continue;
      }
      if (!quoted && (char === ' ' || char === '\t')) continue;
    }
    current += char;
  }
  if (key !== null || current !== '') finish();
  const [first, ...rest] = items;
  return {
    token: typeof first === 'string' ? first : '',
    parameters: rest.filter((item): item is [string, string] => typeof item !== 'string'),
  };
}

/** `%XX` escapes as the bytes they stand for. */
function percentDecoded(text: string): Buffer {
  return Buffer.from(
    text.replace(/%([0-9a-fA-F]{2})/g, (_, hex: string) =>
      String.fromCharCode(Number.parseInt(hex, 16)),
    ),
    'latin1',
  );
}

/** Header text is read as latin1 (one character a byte); its values are UTF-8, as clients send. */
function utf8Of(latin1: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range is the point
  return /^[\u0000-\u007f]*$/.test(latin1)
    ? latin1
    : Buffer.from(latin1, 'latin1').toString('utf8');
}

const LATIN1 = new Set([
  'latin1',
  'ascii',
  'us-ascii',
  'iso-8859-1',
  'iso8859-1',
  'iso88591',
  'iso_8859-1',
  'windows-1252',
  'cp1252',
  'x-cp1252',
]);

/** A text field's bytes in its declared charset (UTF-8 when it names none or one unknown). */
export function decodeText(bytes: Buffer, charset: string): string {
  if (bytes.length === 0) return '';
  if (charset === 'utf-8' || charset === 'utf8') return bytes.toString('utf8');
  if (LATIN1.has(charset)) return bytes.toString('latin1');
  if (charset === 'utf-16le' || charset === 'utf16le' || charset === 'ucs-2') {
    return bytes.toString('utf16le');
  }
  try {
    return new TextDecoder(charset).decode(bytes);
  } catch {
    return bytes.toString('utf8');
  }
}

/** A filename's last path segment, as busboy keeps it (`.` and `..` are no name). */
function lastSegment(filename: string): string {
  const cut = Math.max(filename.lastIndexOf('/'), filename.lastIndexOf('\\'));
  const segment = cut === -1 ? filename : filename.slice(cut + 1);
  return segment === '.' || segment === '..' ? '' : segment;
}
