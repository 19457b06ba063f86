import type { ImageRuntime } from './classifier.js';

/** How the image engine's inference is spread: worker threads, and threads of each one's model. */
export interface ImagePoolShape {
  workers: number;
  threads: number;
}

/** A model's threads beyond this add little: MobileNetV2's layers are too small to split further. */
const MAX_AUTO_THREADS = 4;
const MAX_AUTO_WORKERS = 8;

/**
 * The image pool for `cores` CPUs, from the settings (0: chosen here). onnx: one model using up
 * to 4 threads, and as many such workers as fill the CPUs; a model costs about 100 MB, so on 2
 * cores one worker on 2 threads gives two workers' throughput (70 images/s either way here) at
 * two thirds of the memory, and cuts one image's time (18 ms against 24). tfjs's WASM backend
 * runs on one thread: one worker per CPU, at most 8.
 */
export function imagePoolShape(
  runtime: ImageRuntime,
  cores: number,
  settings: { workers: number; threads: number },
): ImagePoolShape {
  const cpus = Math.max(1, cores);
  if (runtime === 'tfjs') {
    return { workers: settings.workers || Math.min(cpus, MAX_AUTO_WORKERS), threads: 1 };
  }
  const threads = settings.threads || Math.min(cpus, MAX_AUTO_THREADS);
  const workers = settings.workers || Math.min(Math.ceil(cpus / threads), MAX_AUTO_WORKERS);
  return { workers, threads };
}
