import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { load, type NSFWJS } from 'nsfwjs';
import type { ClassScores, ImageClassifier } from './classifier.js';
import { MODEL_INPUT_SIZE } from './decode.js';

interface ModelJson {
  modelTopology: object;
  weightsManifest: Array<{ paths: string[]; weights: tf.io.WeightsManifestEntry[] }>;
}

/**
 * TensorFlow.js on its WASM backend, single-threaded: parallelism comes from the pool of workers,
 * one model each. Call once per thread.
 */
async function startWasmBackend(): Promise<void> {
  const require = createRequire(import.meta.url);
  const wasmFile = require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm');
  setWasmPaths(`${dirname(wasmFile)}/`);
  tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false);
  if (!(await tf.setBackend('wasm')))
    throw new Error('the TensorFlow.js WASM backend did not start');
  await tf.ready();
}

/**
 * nsfwjs's MobileNetV2 on TensorFlow.js (ASSAY_NSFW_IMAGE_RUNTIME=tfjs), loaded from the files
 * scripts/extract-nsfw-model.mjs writes at build time.
 */
export class TfjsClassifier implements ImageClassifier {
  private constructor(private readonly model: NSFWJS) {}

  static async load(modelDir: string): Promise<TfjsClassifier> {
    await startWasmBackend();
    let json: ModelJson;
    let weights: Buffer;
    try {
      json = JSON.parse(await readFile(join(modelDir, 'model.json'), 'utf8')) as ModelJson;
      weights = await readFile(join(modelDir, 'weights.bin'));
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new Error(`the NSFW image model is missing or broken (run npm run build): ${why}`);
    }
    const artifacts: tf.io.ModelArtifacts = {
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest.flatMap((group) => group.weights),
      weightData: new Uint8Array(weights).buffer,
    };
    const handler: tf.io.IOHandler = { load: async () => artifacts };
    // nsfwjs hands its first argument to tf.loadLayersModel, which takes an IOHandler as well as
    // a URL; its type declares only the URL.
    const model = await load(handler as unknown as string, { size: MODEL_INPUT_SIZE });
    return new TfjsClassifier(model);
  }

  /** Class probabilities of MODEL_INPUT_SIZE² RGB pixels. Leaves no tensor behind. */
  async classify(pixels: Uint8Array): Promise<ClassScores> {
    const input = tf.tensor3d(pixels, [MODEL_INPUT_SIZE, MODEL_INPUT_SIZE, 3], 'int32');
    try {
      const predictions = await this.model.classify(input, 5);
      const scores: ClassScores = { Drawing: 0, Hentai: 0, Neutral: 0, Porn: 0, Sexy: 0 };
      for (const { className, probability } of predictions) scores[className] = probability;
      return scores;
    } finally {
      input.dispose();
    }
  }
}
