import { IcapProtocolError } from './socket-reader.js';

/** An ICAP request head and its encapsulated HTTP headers (RFC 3507, section 4). */
export interface IcapRequest {
  method: 'OPTIONS' | 'REQMOD' | 'RESPMOD';
  /** The service: the URI's path without its slash (`avscan` for icap://host/avscan). */
  service: string;
  /** Header names in lower case; repeated headers joined with ", ". */
  headers: Map<string, string>;
  /** The encapsulated HTTP request and response heads, exactly as sent (CRLFs included). */
  requestHead: Buffer | null;
  responseHead: Buffer | null;
  /** Whether a chunked body follows (`req-body` or `res-body`), and which. */
  body: 'req-body' | 'res-body' | null;
  /** Preview bytes announced (`Preview: n`), or null without a preview. */
  preview: number | null;
  /** `Allow: 204` (modification may be skipped) and `Allow: 206` (partial content). */
  allow204: boolean;
  allow206: boolean;
}

/** The longest ICAP head taken, and the longest encapsulated HTTP heads together. */
export const MAX_ICAP_HEAD = 64 * 1024;
export const MAX_HTTP_HEADS = 64 * 1024;
const MAX_HEADERS = 100;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const SERVICE = /^[A-Za-z0-9._-]{1,64}$/;
const SECTIONS = ['req-hdr', 'res-hdr', 'req-body', 'res-body', 'null-body', 'opt-body'] as const;
type Section = (typeof SECTIONS)[number];

/** The parts of a head: its request line and headers; throws IcapProtocolError on bad syntax. */
export function parseIcapHead(head: Buffer): {
  method: string;
  uri: string;
  headers: Map<string, string>;
} {
  const lines = head.toString('latin1').split('\r\n');
  // The head ends with an empty line, so the last two entries are empty.
  lines.length -= 2;
  const requestLine = lines.shift() ?? '';
  const parts = requestLine.split(' ');
  if (parts.length !== 3 || parts[2] !== 'ICAP/1.0') {
    throw new IcapProtocolError('the request line is not "METHOD icap://host/service ICAP/1.0"');
  }
  const [method = '', uri = ''] = parts;
  const headers = new Map<string, string>();
  let count = 0;
  let last: string | null = null;
  for (const line of lines) {
    if (line.startsWith(' ') || line.startsWith('\t')) {
      // An obsolete folded line continues the header before it.
      if (last === null) throw new IcapProtocolError('a header line starts with white space');
      headers.set(last, `${headers.get(last) ?? ''} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).toLowerCase() : '';
    if (!TOKEN.test(name)) throw new IcapProtocolError('a header line has no valid name');
    if (++count > MAX_HEADERS) throw new IcapProtocolError(`more than ${MAX_HEADERS} headers`);
    const value = line.slice(colon + 1).trim();
    const before = headers.get(name);
    headers.set(name, before === undefined ? value : `${before}, ${value}`);
    last = name;
  }
  return { method, uri, headers };
}

/** The service named by an ICAP URI: `icap://host[:port]/name[?args]`, or a bare `/name`. */
export function serviceOf(uri: string): string | null {
  const match = /^(?:icaps?:\/\/[^/?#\s]+)?\/([^?#\s]*)(?:\?[^#\s]*)?$/i.exec(uri);
  const name = match?.[1] ?? null;
  return name !== null && SERVICE.test(name) ? name : null;
}

/**
 * The `Encapsulated` header's sections in order, checked against the method: offsets start at 0
 * and increase, heads come before the one body section, and the body's offset (the heads' total
 * length) stays within MAX_HTTP_HEADS.
 */
export function parseEncapsulated(
  method: IcapRequest['method'],
  value: string | undefined,
): Array<{ section: Section; offset: number }> {
  if (value === undefined) {
    if (method === 'OPTIONS') return [{ section: 'null-body', offset: 0 }];
    throw new IcapProtocolError('the Encapsulated header is missing');
  }
  const entries: Array<{ section: Section; offset: number }> = [];
  for (const raw of value.split(',')) {
    const match = /^\s*([a-z-]+)=(\d{1,9})\s*$/.exec(raw);
    const section = SECTIONS.find((name) => name === match?.[1]);
    if (match === null || section === undefined) {
      throw new IcapProtocolError(`the Encapsulated header has a bad entry: "${raw.trim()}"`);
    }
    entries.push({ section, offset: Number(match[2]) });
  }
  const allowed: Record<IcapRequest['method'], readonly Section[]> = {
    OPTIONS: ['opt-body', 'null-body'],
    REQMOD: ['req-hdr', 'req-body', 'null-body'],
    RESPMOD: ['req-hdr', 'res-hdr', 'res-body', 'null-body'],
  };
  let previous = -1;
  let order = -1;
  entries.forEach(({ section, offset }, index) => {
    const last = index === entries.length - 1;
    const isBody = section.endsWith('-body');
    if (!allowed[method].includes(section)) {
      throw new IcapProtocolError(`a ${method} request cannot encapsulate ${section}`);
    }
    if (isBody !== last) {
      throw new IcapProtocolError('the Encapsulated header must end with its one body section');
    }
    if (index === 0 ? offset !== 0 : offset <= previous) {
      throw new IcapProtocolError(
        'the Encapsulated offsets must start at 0 and increase from one section to the next',
      );
    }
    const rank = SECTIONS.indexOf(section);
    if (rank <= order) throw new IcapProtocolError('the Encapsulated sections are out of order');
    order = rank;
    previous = offset;
  });
  if ((entries.at(-1)?.offset ?? 0) > MAX_HTTP_HEADS) {
    throw new IcapProtocolError(
      `the encapsulated HTTP headers exceed ${MAX_HTTP_HEADS} bytes`,
      400,
    );
  }
  return entries;
}

/**
 * Splits the encapsulated heads (the bytes before the body's offset) by their offsets; each must
 * be an HTTP head that ends with an empty line exactly where the next section starts.
 */
export function splitHeads(
  sections: ReadonlyArray<{ section: Section; offset: number }>,
  heads: Buffer,
): { requestHead: Buffer | null; responseHead: Buffer | null } {
  let requestHead: Buffer | null = null;
  let responseHead: Buffer | null = null;
  for (let index = 0; index < sections.length - 1; index++) {
    const { section, offset } = sections[index] as { section: Section; offset: number };
    const next = (sections[index + 1] as { offset: number }).offset;
    const head = heads.subarray(offset, next);
    const endsHere = head.length >= 4 && head.subarray(head.length - 4).toString() === '\r\n\r\n';
    if (!endsHere || head.indexOf('\r\n\r\n') !== head.length - 4) {
      throw new IcapProtocolError(
        `the Encapsulated offsets do not match the ${section} section (it must end with an empty line where the next section starts)`,
      );
    }
    if (section === 'req-hdr') requestHead = head;
    else responseHead = head;
  }
  return { requestHead, responseHead };
}

/** `Preview: n`, a whole number of bytes. */
export function parsePreview(value: string | undefined): number | null {
  if (value === undefined) return null;
  if (!/^\d{1,9}$/.test(value)) throw new IcapProtocolError('the Preview header is not a number');
  return Number(value);
}

/** The status code of an encapsulated HTTP response head, or null for a request head. */
export function httpStatusOf(head: Buffer | null): number | null {
  if (head === null) return null;
  const match = /^HTTP\/\d\.\d (\d{3})/.exec(head.subarray(0, 16).toString('latin1'));
  return match === null ? null : Number(match[1]);
}

/** One header of an encapsulated HTTP head, case-insensitive; the first if repeated. */
export function httpHeader(head: Buffer | null, name: string): string | null {
  if (head === null) return null;
  const wanted = `${name.toLowerCase()}:`;
  for (const line of head.toString('latin1').split('\r\n')) {
    if (line.toLowerCase().startsWith(wanted)) return line.slice(wanted.length).trim();
  }
  return null;
}

/** The encapsulated HTTP request's target (`GET http://host/path HTTP/1.1`), or null. */
export function httpTarget(head: Buffer | null): string | null {
  if (head === null) return null;
  const firstLine = head.subarray(0, Math.min(head.length, 8192)).toString('latin1');
  const match = /^[A-Z]+ (\S+) HTTP\/\d\.\d\r\n/.exec(firstLine);
  return match?.[1] ?? null;
}
