import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type MultipartLimits, multipartParts } from '../../src/http/multipart-reader.js';
import { END, file, pieces } from '../helpers/multipart-bodies.js';

// @run-alone: times the multipart reader on hostile bodies of growing size

const LIMITS: MultipartLimits = {
  bodyBytes: 1 << 26,
  fieldBytes: 1024,
  fields: 20,
  parts: 1 << 20,
};

/** Reads `body` to its end (bytes counted, not kept: kept, they would be garbage to collect). */
async function drain(body: Buffer, sizes: number[]): Promise<void> {
  try {
    for await (const part of multipartParts(pieces(body, sizes), 'XYZ', LIMITS)) {
      if (part.kind === 'file') for await (const _ of part.content);
    }
  } catch {
    // a refusal is an outcome too: only the time matters here
  }
}

describe('the multipart reader under hostile input', () => {
  test('takes time linear in the body, whatever its bytes and however they are split', async (t) => {
    const hostile: Array<[string, (size: number) => Buffer, number[]]> = [
      ['delimiter prefixes', (n) => Buffer.from(file('\r\n--XY'.repeat(n / 6)) + END), [1 << 16]],
      [
        'delimiter prefixes, in 5-byte pieces',
        (n) => Buffer.from(file('\r\n--XY'.repeat(n / 6)) + END),
        [5],
      ],
      ['carriage returns', (n) => Buffer.from(file('\r'.repeat(n)) + END), [1 << 16]],
      ['carriage returns, a byte at a time', (n) => Buffer.from(file('\r'.repeat(n)) + END), [1]],
      [
        'a header trickled',
        (n) => Buffer.from(`--XYZ\r\nX: ${'\r'.repeat(Math.min(n, 15_000))}`),
        [1],
      ],
      ['empty parts', (n) => Buffer.from(`--XYZ\r\n\r\n\r\n`.repeat(n / 11) + END), [1 << 16]],
    ];
    for (const [what, make, sizes] of hostile) {
      const [smallBody, largeBody] = [make(2_000), make(32_000)];
      // The best of five rounds each, the two sizes taking turns: a busy moment costs both.
      let small = Number.POSITIVE_INFINITY;
      let large = Number.POSITIVE_INFINITY;
      for (let round = 0; round < 5; round++) {
        let started = performance.now();
        await drain(smallBody, sizes);
        small = Math.min(small, performance.now() - started);
        started = performance.now();
        await drain(largeBody, sizes);
        large = Math.min(large, performance.now() - started);
      }
      t.diagnostic(`${what}: ${small.toFixed(1)} ms, ${large.toFixed(1)} ms`);
      // Linear is ~16x (a capped input less); quadratic would be ~256x.
      const ratio = large / Math.max(small, 1);
      assert.ok(
        ratio < 40,
        `${what}: 16x the input took ${ratio.toFixed(1)}x as long (${small.toFixed(1)} ms, ${large.toFixed(1)} ms)`,
      );
    }
  });
});
