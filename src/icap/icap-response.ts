/** ICAP response heads and the HTTP messages they carry (RFC 3507, section 4.3.3 and 4.9). */

const REASONS: Record<number, string> = {
  100: 'Continue',
  200: 'OK',
  204: 'No Content',
  206: 'Partial Content',
  400: 'Bad Request',
  404: 'ICAP Service Not Found',
  405: 'Method Not Allowed For Service',
  408: 'Request Timeout',
  500: 'Server Error',
  501: 'Method Not Implemented',
  503: 'Service Overloaded',
  505: 'ICAP Version Not Supported',
};

export type HeaderList = ReadonlyArray<readonly [string, string]>;

/** A header value as one safe line: control characters (CR, LF, NUL) become spaces. */
export function headerValue(value: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes.
  return value.replace(/[\u0000-\u001f\u007f]/g, ' ').slice(0, 1024);
}

/** `ICAP/1.0 <status> <reason>`, the given headers, and the empty line. */
export function icapHead(status: number, headers: HeaderList): Buffer {
  const lines = [`ICAP/1.0 ${status} ${REASONS[status] ?? 'Unknown'}`];
  for (const [name, value] of headers) lines.push(`${name}: ${value}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

/** The one-line error an ICAP client shows, and for whom the status stands. */
export interface IcapFailure {
  status: 400 | 404 | 405 | 408 | 500 | 501 | 503 | 505;
  /** Why, in words: sent as `X-Assay-Error` and logged. */
  reason: string;
}

/** A chunk of HTTP/1.1 chunked encoding. */
export function chunkHeader(length: number): Buffer {
  return Buffer.from(`${length.toString(16)}\r\n`, 'latin1');
}

export const CRLF = Buffer.from('\r\n');
export const LAST_CHUNK = Buffer.from('0\r\n\r\n');

/**
 * The HTTP response that replaces a blocked message: 403, a short page (JSON when the client's
 * request asked for it) saying what was found and the result's id.
 */
export function blockedResponse(
  what: { title: string; detail: string; resultId: string | null },
  wantsJson: boolean,
): { head: Buffer; body: Buffer } {
  const body = wantsJson
    ? Buffer.from(
        `${JSON.stringify({ error: what.title, detail: what.detail, result: what.resultId })}\n`,
      )
    : Buffer.from(
        `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(what.title)}</title></head>\n<body><h1>${escapeHtml(what.title)}</h1><p>${escapeHtml(what.detail)}</p>${
          what.resultId === null ? '' : `<p>Result: <code>${escapeHtml(what.resultId)}</code></p>`
        }</body></html>\n`,
      );
  const head = Buffer.from(
    [
      'HTTP/1.1 403 Forbidden',
      `Content-Type: ${wantsJson ? 'application/json' : 'text/html; charset=utf-8'}`,
      `Content-Length: ${body.length}`,
      'Cache-Control: no-store',
      'Connection: close',
      '',
      '',
    ].join('\r\n'),
    'latin1',
  );
  return { head, body };
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

/**
 * What clients read to learn what was found: `X-Infection-Found` (Nextcloud, c-icap's
 * virus_scan), `X-Violations-Found` (a count, then per finding a folded group of file name,
 * threat, problem id and resolution) and `X-Virus-ID`.
 */
export function findingHeaders(findings: readonly string[], fileName: string): HeaderList {
  const threats = findings.map((finding) => headerValue(finding).replace(/;/g, ','));
  const first = threats[0] ?? 'unknown';
  const file = headerValue(fileName === '' ? '-' : fileName);
  const violations = threats.map((threat) => `\r\n\t${file}\r\n\t${threat}\r\n\t0\r\n\t2`).join('');
  return [
    ['X-Infection-Found', `Type=0; Resolution=2; Threat=${first};`],
    ['X-Violations-Found', `${threats.length}${violations}`],
    ['X-Virus-ID', first],
  ];
}
