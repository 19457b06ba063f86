import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import sharp from 'sharp';
import {
  CLASS_NAMES,
  type ClassScores,
  type ImageClassifier,
  loadClassifier,
} from '../../src/engines/nsfw-image/classifier.js';
import { decodeForModel } from '../../src/engines/nsfw-image/decode.js';
import { defaultModelDir, NsfwImageEngine } from '../../src/engines/nsfw-image/engine.js';
import {
  type KerasLayer,
  type KerasTopology,
  kerasToOnnx,
} from '../../src/engines/nsfw-image/keras-to-onnx.js';
import { packageRoot } from '../../src/paths.js';
import { drawing, photoLike, screenshot } from '../helpers/images.js';

const signal = () => AbortSignal.timeout(60_000);

/**
 * The corpus: the sample image, and images made here of several sizes, in JPEG, PNG, WebP and GIF.
 * Drawings and screenshots score differently from photos, so a wrong conversion shows.
 */
async function corpus(): Promise<Array<[string, Buffer]>> {
  const images: Array<[string, Buffer]> = [
    ['sample image.jpg', readFileSync(join(packageRoot(), 'static', 'samples', 'image.jpg'))],
  ];
  const sources: Array<[string, Buffer]> = [
    ['drawing', await drawing()],
    ['screenshot', await screenshot()],
    ['photo 64 x 48', await photoLike(64, 48, 1)],
    ['photo 640 x 480', await photoLike(640, 480, 2)],
    ['photo 1155 x 866', await photoLike(1155, 866, 3)],
    ['photo 300 x 1200', await photoLike(300, 1200, 4)],
  ];
  for (const [name, source] of sources) {
    for (const format of ['jpeg', 'png', 'webp', 'gif'] as const) {
      images.push([`${name} ${format}`, await sharp(source).toFormat(format).toBuffer()]);
    }
  }
  return images;
}

describe('nsfw-image on onnxruntime and on TensorFlow.js', () => {
  let onnx: ImageClassifier;
  let onnxOnTwoThreads: ImageClassifier;
  let tfjs: ImageClassifier;
  let images: Array<[string, Buffer]>;

  before(async () => {
    [onnx, onnxOnTwoThreads, tfjs, images] = await Promise.all([
      loadClassifier('onnx', defaultModelDir(), 1),
      loadClassifier('onnx', defaultModelDir(), 2),
      loadClassifier('tfjs', defaultModelDir(), 1),
      corpus(),
    ]);
  });

  test('every score of every image is within 0.01 of the other runtime', async () => {
    const seen: ClassScores[] = [];
    for (const [name, image] of images) {
      const { pixels } = await decodeForModel(image, 100_000_000);
      const [native, wasm] = [await onnx.classify(pixels), await tfjs.classify(pixels)];
      for (const className of CLASS_NAMES) {
        const difference = Math.abs(native[className] - wasm[className]);
        assert.ok(
          difference <= 0.01,
          `${name}, ${className}: onnx ${native[className]}, tfjs ${wasm[className]}`,
        );
      }
      const threaded = await onnxOnTwoThreads.classify(pixels);
      for (const className of CLASS_NAMES) {
        assert.ok(Math.abs(native[className] - threaded[className]) < 1e-4, `${name}: 2 threads`);
      }
      const sum = CLASS_NAMES.reduce((total, className) => total + native[className], 0);
      assert.ok(Math.abs(sum - 1) < 1e-4, `${name}: the probabilities add up to ${sum}`);
      seen.push(native);
    }
    // The corpus tells images apart: the comparison is not between two constant answers.
    const drawingScores = seen.map((scores) => scores.Drawing);
    assert.ok(Math.max(...drawingScores) - Math.min(...drawingScores) > 0.2);
  });

  describe('the engines decide alike', () => {
    const engines: Partial<Record<'onnx' | 'tfjs', NsfwImageEngine>> = {};
    before(async () => {
      engines.onnx = await NsfwImageEngine.create({ poolSize: 1, runtime: 'onnx' });
      engines.tfjs = await NsfwImageEngine.create({ poolSize: 1, runtime: 'tfjs' });
    });
    after(async () => {
      await engines.onnx?.close();
      await engines.tfjs?.close();
    });

    test('the same verdict at the threshold for every image', async () => {
      for (const [name, image] of images) {
        const type = `image/${(await sharp(image).metadata()).format}`;
        const native = await engines.onnx?.examine(image, type, signal());
        const wasm = await engines.tfjs?.examine(image, type, signal());
        assert.deepEqual(native?.findings, wasm?.findings, name);
        // The traces name the same scores, to the third decimal give or take one.
        const scores = (trace: string[] | undefined) =>
          [...(trace?.join('\n') ?? '').matchAll(/ (\d\.\d{3})/g)].map((m) => Number(m[1]));
        const [a, b] = [scores(native?.trace), scores(wasm?.trace)];
        assert.equal(a.length, b.length, name);
        for (const [i, value] of a.entries()) {
          assert.ok(Math.abs(value - (b[i] ?? Number.NaN)) <= 0.01, `${name}: ${a} vs ${b}`);
        }
      }
    });
  });
});

describe('keras-to-onnx', () => {
  const topology = (layers: KerasLayer[]): KerasTopology => ({
    model_config: {
      class_name: 'Model',
      config: { layers, input_layers: [['input_1', 0, 0]], output_layers: [['out', 0, 0]] },
    },
  });
  const input: KerasLayer = {
    class_name: 'InputLayer',
    config: { name: 'input_1', batch_input_shape: [null, 4, 4, 3] },
    inbound_nodes: [],
  };

  test('a layer kind it does not know is an error, not a different model', () => {
    const model = topology([
      input,
      { class_name: 'LSTM', config: { name: 'out' }, inbound_nodes: [[['input_1', 0, 0, {}]]] },
    ]);
    assert.throws(() => kerasToOnnx(model, [], new Uint8Array()), /kind LSTM is not converted/);
  });

  test('weights that do not match their manifest are an error', () => {
    const model = topology([input]);
    const specs = [{ name: 'w', shape: [2, 2], dtype: 'float32' }];
    assert.throws(() => kerasToOnnx(model, specs, new Uint8Array(15)), /15 bytes/);
  });
});
