/** nsfwjs's classes, each with its probability (they add up to 1). */
export interface ClassScores {
  Drawing: number;
  Hentai: number;
  Neutral: number;
  Porn: number;
  Sexy: number;
}

/** The model's class order: its output's index of each class. */
export const CLASS_NAMES = ['Drawing', 'Hentai', 'Neutral', 'Porn', 'Sexy'] as const;

/** What runs the model: onnxruntime (native, the default) or TensorFlow.js on WASM. */
export type ImageRuntime = 'onnx' | 'tfjs';

export const IMAGE_RUNTIMES: readonly ImageRuntime[] = ['onnx', 'tfjs'];

/** One copy of the model; one image at a time. */
export interface ImageClassifier {
  /** Class probabilities of MODEL_INPUT_SIZE² RGB pixels (decode.ts). */
  classify(pixels: Uint8Array): Promise<ClassScores>;
}

/**
 * Loads the model built into `modelDir` on `runtime`, `threads` inference threads (onnx; tfjs's
 * WASM backend runs on one). Each runtime is imported only when chosen: a worker of one never
 * holds the other's library.
 */
export async function loadClassifier(
  runtime: ImageRuntime,
  modelDir: string,
  threads: number,
): Promise<ImageClassifier> {
  if (runtime === 'tfjs') {
    const { TfjsClassifier } = await import('./tfjs-classifier.js');
    return TfjsClassifier.load(modelDir);
  }
  const { OnnxClassifier } = await import('./onnx-classifier.js');
  return OnnxClassifier.load(modelDir, threads);
}
