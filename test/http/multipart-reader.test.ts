import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { multipartTokens, mutateBytes, seeded } from '../../soak/fuzz-requests.js';
import { HttpError } from '../../src/http/http-error.js';
import {
  MAX_PART_HEADER_BYTES,
  type MultipartLimits,
  multipartBoundary,
  multipartParts,
} from '../../src/http/multipart-reader.js';
import { END, field, file, part, pieces } from '../helpers/multipart-bodies.js';

const LIMITS: MultipartLimits = { bodyBytes: 1 << 20, fieldBytes: 1024, fields: 20, parts: 50 };

type Read =
  | { kind: 'field'; name: string; value: string; truncated: boolean }
  | { kind: 'file'; name: string; filename: string | undefined; content: string };

/** Every part of `body`, file contents read whole (latin1, to compare bytes as text). */
async function readAll(
  body: Buffer | string,
  { boundary = 'XYZ', sizes = [1 << 16], limits = LIMITS } = {},
): Promise<Read[]> {
  const parts: Read[] = [];
  const bytes = typeof body === 'string' ? Buffer.from(body, 'latin1') : body;
  for await (const part of multipartParts(pieces(bytes, sizes), boundary, limits)) {
    if (part.kind === 'field') {
      parts.push(part);
    } else {
      const chunks: Buffer[] = [];
      for await (const chunk of part.content) chunks.push(chunk);
      const { kind, name, filename } = part;
      parts.push({ kind, name, filename, content: Buffer.concat(chunks).toString('latin1') });
    }
  }
  return parts;
}

/** The error reading `body` ends with, as `status message`. */
async function failure(body: Buffer | string, options: Parameters<typeof readAll>[1] = {}) {
  try {
    await readAll(body, options);
  } catch (error) {
    assert.ok(error instanceof HttpError, `not an HttpError: ${error}`);
    return `${error.statusCode} ${error.message}`;
  }
  assert.fail('the body was read without an error');
}

describe('the multipart reader', () => {
  test('reads fields and a file, the same however the body is split', async () => {
    // Content that holds every prefix of the delimiter, a CR at the end, and CRLF-dash runs.
    const content = 'a\r\n--XY\r\n--X\r\n-\r\r\n--XY\r\n\r\n--\r';
    const body = `${field('metadata[a]', 'one')}${file(content)}${field('callback', 'https://x/y')}${END}`;
    const expected: Read[] = [
      { kind: 'field', name: 'metadata[a]', value: 'one', truncated: false },
      { kind: 'file', name: 'file', filename: 'a.bin', content },
      { kind: 'field', name: 'callback', value: 'https://x/y', truncated: false },
    ];
    assert.deepEqual(await readAll(body), expected);
    for (const sizes of [[1], [2], [3], [5, 1], [7, 13, 1]]) {
      assert.deepEqual(await readAll(body, { sizes }), expected, `pieces of ${sizes}`);
    }
    for (let cut = 1; cut < body.length; cut++) {
      assert.deepEqual(await readAll(body, { sizes: [cut] }), expected, `cut at ${cut}`);
    }
  });

  test('ignores a preamble and an epilogue, and reads empty parts', async () => {
    const body = `preamble\r\n--not it\r\n${file('')}${field('e', '')}--XYZ--\r\nepilogue --XYZ\r\n`;
    assert.deepEqual(await readAll(body), [
      { kind: 'file', name: 'file', filename: 'a.bin', content: '' },
      { kind: 'field', name: 'e', value: '', truncated: false },
    ]);
  });

  test('reads part headers as clients write them', async () => {
    const euro = Buffer.from('€', 'utf8').toString('latin1');
    const body =
      part('content-disposition: FORM-DATA; NAME="a\\"b"', 'quoted') +
      part('Content-Disposition: form-data; name=plain; filename="C:\\\\dir\\\\x.txt"', 'path') +
      part('Content-Disposition: form-data; name="f"; filename="../../etc/passwd"', 'up') +
      part(`Content-Disposition: form-data; name="f"; filename*=UTF-8''%E2%82%AC.txt`, 'ext') +
      part(`Content-Disposition: form-data; name="f"; filename="${euro}.bin"`, 'utf8') +
      part('Content-Disposition: form-data;\r\n name="folded"', 'fold') +
      part(
        'Content-Disposition: form-data; name="bin"\r\nContent-Type: application/octet-stream',
        'octets',
      ) +
      part(
        'Content-Disposition: form-data; name="l"\r\nContent-Type: text/plain; charset=ISO-8859-1',
        '\xe9',
      ) +
      part('Content-Disposition: form-data; flag; name="token"', 'kept') +
      part('Content-Type: text/plain', 'no disposition') +
      part('Content-Disposition: attachment; name="x"', 'not form-data') +
      part('this is not a header\r\nContent-Disposition: form-data; name="late"', 'garbage first') +
      END;
    assert.deepEqual(await readAll(body), [
      { kind: 'field', name: 'a"b', value: 'quoted', truncated: false },
      { kind: 'file', name: 'plain', filename: 'x.txt', content: 'path' },
      { kind: 'file', name: 'f', filename: 'passwd', content: 'up' },
      { kind: 'file', name: 'f', filename: '€.txt', content: 'ext' },
      { kind: 'file', name: 'f', filename: '€.bin', content: 'utf8' },
      { kind: 'field', name: 'folded', value: 'fold', truncated: false },
      { kind: 'file', name: 'bin', filename: undefined, content: 'octets' },
      { kind: 'field', name: 'l', value: 'é', truncated: false },
      { kind: 'field', name: 'token', value: 'kept', truncated: false },
    ]);
  });

  test('keeps a field up to its limit and says it was cut', async () => {
    const limits = { ...LIMITS, fieldBytes: 4 };
    assert.deepEqual(await readAll(`${field('m', '123456')}${END}`, { limits, sizes: [3] }), [
      { kind: 'field', name: 'm', value: '1234', truncated: true },
    ]);
  });

  test('refuses what is malformed with 400 and what is too much with 413', async () => {
    const cases: Array<[string | Buffer, RegExp, Parameters<typeof readAll>[1]?]> = [
      [
        `--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nhello`,
        /^400 .*ended inside a part/,
      ],
      ['--XYZ', /^400 .*ended after a boundary/],
      ['--XYZ\r\nContent-Disposition: form-data; name="a"', /^400 .*ended inside part headers/],
      ['no boundary at all', /^400 .*ended inside a part/],
      [
        `--XYZ\r\nX-Pad: ${'a'.repeat(MAX_PART_HEADER_BYTES)}\r\n\r\nx\r\n${END}`,
        /^400 .*headers are longer/,
      ],
      [
        `--XYZ\r\nX-Pad: ${'a'.repeat(MAX_PART_HEADER_BYTES)}\r\n\r\nx\r\n${END}`,
        /^400 .*headers are longer/,
        { sizes: [100] },
      ],
      [
        `${file('x'.repeat(2000))}${END}`,
        /^413 .*exceeds the limit of 1000 bytes/,
        { limits: { ...LIMITS, bodyBytes: 1000 } },
      ],
      [`${field('a', '1').repeat(21)}${END}`, /^413 at most 20 fields/],
      [`${file('1', 'other').repeat(51)}${END}`, /^413 at most 50 parts/],
      [`${file('x')}${END}`, /^400 .*boundary must have/, { boundary: '' }],
      [`${file('x')}${END}`, /^400 .*boundary must have/, { boundary: 'b'.repeat(201) }],
    ];
    for (const [body, expected, options] of cases) {
      assert.match(await failure(body, options), expected, String(body).slice(0, 80));
    }
  });

  test('a file part left unread is skipped, and the next part still read', async () => {
    const body = `${file('x'.repeat(100_000))}${field('after', 'yes')}${END}`;
    const names: string[] = [];
    for await (const part of multipartParts(pieces(Buffer.from(body), [4096]), 'XYZ', LIMITS)) {
      names.push(part.name);
      if (part.kind === 'file') {
        for await (const _ of part.content) break; // one chunk, then leaves
      }
    }
    assert.deepEqual(names, ['file', 'after']);
  });

  test('finds the boundary in a Content-Type', () => {
    assert.equal(multipartBoundary('multipart/form-data; boundary=abc'), 'abc');
    assert.equal(multipartBoundary('Multipart/Form-Data;BOUNDARY="a b;c"'), 'a b;c');
    assert.equal(multipartBoundary('multipart/form-data; charset=utf-8; boundary=x'), 'x');
    assert.equal(multipartBoundary('multipart/form-data'), null);
    assert.equal(multipartBoundary('multipart/mixed; boundary=abc'), null);
    assert.equal(multipartBoundary('multipart/form-datax; boundary=abc'), null);
    assert.equal(multipartBoundary(undefined), null);
  });

  test('mutated bodies are read or refused with 400 or 413, the same however they are split', async () => {
    const seed = Buffer.from(
      `${field('metadata[a]', 'value')}${file('some file content\r\n--XY')}${field('callback', 'https://e/cb')}${END}`,
      'latin1',
    );
    const tokens = multipartTokens('XYZ');
    const outcomes = new Map<string, number>();
    for (let i = 1; i <= 400; i++) {
      const body = mutateBytes(seeded(i), seed, tokens);
      const outcome = async (sizes: number[]) => {
        try {
          return JSON.stringify(await readAll(body, { sizes }));
        } catch (error) {
          assert.ok(error instanceof HttpError, `seed ${i}: ${error}`);
          assert.ok([400, 413].includes(error.statusCode), `seed ${i}: ${error.statusCode}`);
          return `${error.statusCode} ${error.message}`;
        }
      };
      const whole = await outcome([1 << 16]);
      assert.equal(await outcome([1]), whole, `seed ${i}, bytes one at a time`);
      assert.equal(await outcome([1 + (i % 17)]), whole, `seed ${i}, pieces of ${1 + (i % 17)}`);
      const kind = whole.startsWith('[') ? 'read' : whole.slice(0, 3);
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    }
    assert.ok(
      (outcomes.get('read') ?? 0) > 0 && (outcomes.get('400') ?? 0) > 0,
      JSON.stringify([...outcomes]),
    );
  });
});
