import assert from 'node:assert/strict';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { parse as parseYaml } from 'yaml';

export type LegacyFormat = 'json' | 'xml' | 'yaml';
export const FORMATS: readonly LegacyFormat[] = ['json', 'xml', 'yaml'];

export interface LegacyDocument {
  status?: string;
  virus?: string[];
  reason?: string;
  checksum?: string;
  request_id?: string;
}

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const MEDIA_TYPE = { json: 'application/json', xml: 'application/xml', yaml: 'application/yaml' };

/** Parses a v1.0 body with a real parser for its format, after checking its media type. */
export function parseLegacy(format: LegacyFormat, text: string, contentType: string | null) {
  assert.equal(contentType?.split(';')[0], MEDIA_TYPE[format], `media type of ${format}`);
  if (format === 'json') return JSON.parse(text) as LegacyDocument;
  if (format === 'yaml')
    return parseYaml(text, { strict: true, uniqueKeys: true }) as LegacyDocument;
  const valid = XMLValidator.validate(text);
  assert.equal(valid, true, `well-formed XML: ${JSON.stringify(valid)}\n${text}`);
  const parsed = new XMLParser({
    isArray: (name) => name === 'virus',
    parseTagValue: false,
  }).parse(text) as { response?: LegacyDocument };
  assert.ok(parsed.response, `a response root element: ${text}`);
  return parsed.response;
}

/** Sends a v1.0 request and parses its answer in the format asked for. */
export async function legacyRequest(
  url: string,
  init: RequestInit & { format?: LegacyFormat; query?: string; answeredIn?: LegacyFormat } = {},
): Promise<{ status: number; headers: Headers; body: LegacyDocument; text: string }> {
  // `answeredIn`: the format was asked for elsewhere (a form field), not in the query.
  const format = init.answeredIn ?? init.format ?? 'json';
  const query = [init.format ? `format=${init.format}` : '', init.query ?? '']
    .filter((part) => part !== '')
    .join('&');
  const response = await fetch(
    query === '' ? url : `${url}${url.includes('?') ? '&' : '?'}${query}`,
    init,
  );
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: parseLegacy(format, text, response.headers.get('content-type')),
  };
}
