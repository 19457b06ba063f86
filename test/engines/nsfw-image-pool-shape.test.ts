import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { imagePoolShape } from '../../src/engines/nsfw-image/pool-shape.js';

const auto = { workers: 0, threads: 0 };

describe('the image pool sized to the machine', () => {
  test('onnx: models on one thread, one worker per two CPUs (the other decodes), at most 8', () => {
    assert.deepEqual(imagePoolShape('onnx', 1, auto), { workers: 1, threads: 1 });
    assert.deepEqual(imagePoolShape('onnx', 2, auto), { workers: 1, threads: 1 });
    assert.deepEqual(imagePoolShape('onnx', 3, auto), { workers: 1, threads: 1 });
    assert.deepEqual(imagePoolShape('onnx', 4, auto), { workers: 2, threads: 1 });
    assert.deepEqual(imagePoolShape('onnx', 16, auto), { workers: 8, threads: 1 });
    assert.deepEqual(imagePoolShape('onnx', 64, auto), { workers: 8, threads: 1 });
  });

  test('tfjs runs on one thread: one worker per CPU, at most 8', () => {
    assert.deepEqual(imagePoolShape('tfjs', 2, auto), { workers: 2, threads: 1 });
    assert.deepEqual(imagePoolShape('tfjs', 32, auto), { workers: 8, threads: 1 });
    assert.deepEqual(imagePoolShape('tfjs', 2, { workers: 0, threads: 4 }), {
      workers: 2,
      threads: 1,
    });
  });

  test('settings win; the other figure fills the CPUs around them', () => {
    assert.deepEqual(imagePoolShape('onnx', 2, { workers: 2, threads: 0 }), {
      workers: 2,
      threads: 1,
    });
    assert.deepEqual(imagePoolShape('onnx', 8, { workers: 0, threads: 2 }), {
      workers: 2,
      threads: 2,
    });
    assert.deepEqual(imagePoolShape('onnx', 2, { workers: 0, threads: 2 }), {
      workers: 1,
      threads: 2,
    });
    assert.deepEqual(imagePoolShape('onnx', 8, { workers: 1, threads: 8 }), {
      workers: 1,
      threads: 8,
    });
    assert.deepEqual(imagePoolShape('tfjs', 8, { workers: 3, threads: 0 }), {
      workers: 3,
      threads: 1,
    });
  });
});
