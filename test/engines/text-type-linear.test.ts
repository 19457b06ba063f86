import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TEXT_RULES } from '../../src/engines/text-type.js';
import { HOSTILE_SIZES, measureTextPathsInWorker, textPaths } from '../helpers/hostile-text.js';

// @run-alone: times every text path: under 1 s in all, and linear

/** Past this, a path's time at 100 KB is worth comparing with its time at 10 KB (below: noise). */
const MEASURABLE_MS = 2;

describe('text paths on hostile input', () => {
  test('every text rule has hostile inputs', () => {
    const paths = textPaths();
    for (const rule of TEXT_RULES) {
      const path = paths.find((candidate) => candidate.name === `rule ${rule.name}`);
      assert.ok(path && path.inputs.length > 0, `no hostile input for the rule ${rule.name}`);
    }
  });

  test('1 KB, 10 KB and 100 KB through every path: under a second in all, and linear', async (t) => {
    // In a worker: a catastrophic pattern freezes the worker, not the test, and is named.
    const timings = await measureTextPathsInWorker(20_000);
    const total = timings.reduce((sum, timing) => sum + timing.first.reduce((a, b) => a + b), 0);
    const table = timings
      .map(({ path, first }) => `${path}: ${first.map((ms) => ms.toFixed(2)).join(' / ')} ms`)
      .join('\n');
    t.diagnostic(`${total.toFixed(0)} ms in all (1 KB / 10 KB / 100 KB):\n${table}`);
    assert.ok(total < 1000, `${total.toFixed(0)} ms in all (sizes ${HOSTILE_SIZES}):\n${table}`);
    for (const { path, best } of timings) {
      const [, at10k = 0, at100k = 0] = best;
      if (at100k < MEASURABLE_MS) continue;
      // Linear is ~10x (less where a window caps the input); quadratic would be ~100x.
      assert.ok(
        at100k < 30 * Math.max(at10k, MEASURABLE_MS / 10),
        `${path}: ${at10k.toFixed(2)} ms at 10 KB, ${at100k.toFixed(2)} ms at 100 KB`,
      );
    }
  });
});
