import type { ImageRuntime } from './classifier.js';

/** How the image engine's inference is spread: worker threads, and threads of each one's model. */
export interface ImagePoolShape {
  workers: number;
  threads: number;
}

const MAX_AUTO_WORKERS = 8;

/**
 * The image pool for `cores` CPUs, from the settings (0: chosen here). onnx: models on one thread
 * each, one worker per two CPUs. An image costs about as much CPU to decode (sharp, on libuv's
 * threads) as to infer on one thread, so the other CPU decodes the next image while a model
 * runs; a model's second thread cuts its time by a tenth for half again its CPU (8.0 ms of CPU
 * an image against 5.1 here), and a model costs about 60 MB. On 2 cores: one worker of 1 thread
 * gave 141 images/s at concurrency 2 and 257 MB of RSS, against 123 images/s and 283 MB for one
 * of 2 threads. tfjs's WASM backend runs on one thread: one worker per CPU, at most 8.
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
  const threads = settings.threads || 1;
  const workers =
    settings.workers || Math.min(Math.max(1, Math.floor(cpus / (2 * threads))), MAX_AUTO_WORKERS);
  return { workers, threads };
}
