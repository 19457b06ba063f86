import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { measureHostileBodiesInWorker } from '../helpers/multipart-timing.js';

// @run-alone: times the multipart reader on hostile bodies of growing size

describe('the multipart reader under hostile input', () => {
  test('takes time linear in the body, whatever its bytes and however they are split', async (t) => {
    for (const { what, small, large } of await measureHostileBodiesInWorker()) {
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
