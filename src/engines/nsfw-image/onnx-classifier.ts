import { join } from 'node:path';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { CLASS_NAMES, type ClassScores, type ImageClassifier } from './classifier.js';
import { MODEL_INPUT_SIZE } from './decode.js';

const PIXEL_VALUES = MODEL_INPUT_SIZE * MODEL_INPUT_SIZE * 3;

/**
 * nsfwjs's MobileNetV2 on onnxruntime's CPU library (in the onnxruntime-node package), from the
 * model.onnx that scripts/extract-nsfw-model.mjs converts at build time (keras-to-onnx.ts).
 */
export class OnnxClassifier implements ImageClassifier {
  /** The model's input, reused: one image at a time. */
  private readonly input = new Float32Array(PIXEL_VALUES);

  private constructor(private readonly session: InferenceSession) {}

  static async load(modelDir: string, threads: number): Promise<OnnxClassifier> {
    let session: InferenceSession;
    try {
      session = await InferenceSession.create(join(modelDir, 'model.onnx'), {
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
        // 'all' includes the layouts of onnxruntime's x86 kernels: twice the speed of 'extended'.
        graphOptimizationLevel: 'all',
        // The arena keeps what inference once needed, about 20 MB a model more, for no speed.
        enableCpuMemArena: false,
        // Threads that spin between operators cost the other workers their CPU: with 2 threads
        // per model, 16.8 ms of CPU an image instead of 23.4, at concurrency 2.
        extra: { session: { intra_op: { allow_spinning: '0' } } },
        // Warnings of its own would go to stderr, outside Assay's log.
        logSeverityLevel: 3,
      });
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      throw new Error(`the NSFW image model is missing or broken (run npm run build): ${why}`);
    }
    return new OnnxClassifier(session);
  }

  async classify(pixels: Uint8Array): Promise<ClassScores> {
    if (pixels.length !== PIXEL_VALUES)
      throw new Error(`${pixels.length} pixel values, not ${PIXEL_VALUES}`);
    this.input.set(pixels);
    const input = new Tensor('float32', this.input, [1, MODEL_INPUT_SIZE, MODEL_INPUT_SIZE, 3]);
    const { probabilities } = await this.session.run({ input });
    const values = probabilities?.data;
    if (!(values instanceof Float32Array) || values.length !== CLASS_NAMES.length) {
      throw new Error('the NSFW image model answered no probabilities');
    }
    const scores: ClassScores = { Drawing: 0, Hentai: 0, Neutral: 0, Porn: 0, Sexy: 0 };
    for (const [i, name] of CLASS_NAMES.entries()) scores[name] = values[i] ?? 0;
    return scores;
  }
}
