// Build step (npm run build): nsfwjs ships its MobileNetV2 model as base64 inside JavaScript
// bundles, which take seconds to parse. This writes it out once as model.json and weights.bin
// under dist/models/, from where each inference worker loads it in well under a second, and
// converts it to ONNX (model.onnx) for onnxruntime.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
// nsfwjs's main is dist/cjs/index.js; its package root is two levels up.
const source = join(dirname(require.resolve('nsfwjs')), '..', 'models', 'mobilenet_v2');
const target = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  'dist',
  'models',
  'nsfw-mobilenet-v2',
);

const model = require(join(source, 'model.min.js'));
const shards = model.weightsManifest.flatMap((group) => group.paths);
const weights = Buffer.concat(
  shards.map((shard) => Buffer.from(require(join(source, `${shard}.min.js`)), 'base64')),
);
// Weights are stored quantized (one or two bytes each) or as float32.
const bytesPerValue = { uint8: 1, uint16: 2, float16: 2 };
const expected = model.weightsManifest
  .flatMap((group) => group.weights)
  .reduce(
    (bytes, spec) =>
      bytes +
      spec.shape.reduce((a, b) => a * b, 1) * (bytesPerValue[spec.quantization?.dtype] ?? 4),
    0,
  );
if (weights.length !== expected) {
  throw new Error(`nsfwjs weights: ${weights.length} bytes, the manifest describes ${expected}`);
}
mkdirSync(target, { recursive: true });
writeFileSync(join(target, 'weights.bin'), weights);
writeFileSync(
  join(target, 'model.json'),
  JSON.stringify({
    format: 'layers-model',
    modelTopology: model.modelTopology,
    weightsManifest: [
      { paths: ['weights.bin'], weights: model.weightsManifest.flatMap((group) => group.weights) },
    ],
  }),
);

// The same model for onnxruntime (ASSAY_NSFW_IMAGE_RUNTIME=onnx), converted by Assay's own code
// (src/engines/nsfw-image/keras-to-onnx.ts, compiled by the build's tsc just before this).
const { kerasToOnnx } = await import('../dist/engines/nsfw-image/keras-to-onnx.js');
writeFileSync(
  join(target, 'model.onnx'),
  kerasToOnnx(
    model.modelTopology,
    model.weightsManifest.flatMap((group) => group.weights),
    new Uint8Array(weights),
  ),
);
