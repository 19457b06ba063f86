import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../../paths.js';
import type { ContentEngine, EngineReport } from '../engine.js';
import { IMAGE_TEST_SAMPLE_BYTES, IMAGE_TEST_SAMPLE_SHA256 } from '../test-content.js';
import { WorkerPool } from '../worker-pool.js';
import type { ClassScores, ImageRuntime } from './classifier.js';
import type {
  ClassifierWorkerSettings,
  ClassifyRequest,
  ClassifyResult,
} from './classifier-worker.js';
import { decodeForModel } from './decode.js';
import { IMAGE_TYPES } from './image-types.js';
import { type ImagePoolShape, imagePoolShape } from './pool-shape.js';

export { IMAGE_TYPES };

export const NUDITY_FINDING = 'content.image.nsfw.nudity';

export interface NsfwImageOptions {
  /** Porn + Hentai probability from which an image is flagged. Default 0.5. */
  threshold?: number;
  /** What runs the model. Default onnx (native, about 5 times tfjs's speed). */
  runtime?: ImageRuntime;
  /** Inference worker threads, one model each. Default: imagePoolShape's for this machine. */
  poolSize?: number;
  /** Inference threads of each worker's model (onnx). Default: imagePoolShape's. */
  threads?: number;
  /** Largest image examined, in pixels (width x height); larger ones are an error. Default 100 M. */
  maxPixels?: number;
  /** Largest content examined. Default 50 MiB. */
  maxBytes?: number;
  /** Time cap per image, on top of the caller's signal. Default 30 s. */
  timeoutMs?: number;
  /** Where the build put the model (scripts/extract-nsfw-model.mjs). */
  modelDir?: string;
  log?: (message: string) => void;
}

/** The model's folder in a built Assay. */
export function defaultModelDir(): string {
  return join(packageRoot(), 'dist', 'models', 'nsfw-mobilenet-v2');
}

/** Rejects as soon as the signal aborts, whatever the promise is still doing. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      const reason = signal.reason;
      const why =
        reason instanceof Error && reason.name !== 'TimeoutError' ? reason.message : 'timed out';
      reject(new Error(`nsfw-image stopped: ${why}`));
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** COMPAT.md's sample image, by its hash (only content of its length is hashed). */
function isTestSample(content: Buffer): boolean {
  return (
    content.length === IMAGE_TEST_SAMPLE_BYTES &&
    createHash('sha256').update(content).digest('hex') === IMAGE_TEST_SAMPLE_SHA256
  );
}

function scoreLine(scores: ClassScores): string {
  return Object.entries(scores)
    .map(([name, probability]) => `${name} ${probability.toFixed(3)}`)
    .join(', ');
}

/**
 * NSFW_IMAGE: nsfwjs's MobileNetV2 classifier, on onnxruntime (or TensorFlow.js). Decoding runs on
 * sharp's threads, inference in a pool of worker threads; an image is flagged when Porn + Hentai
 * reaches the threshold.
 */
export class NsfwImageEngine implements ContentEngine {
  readonly name = 'nsfw-image';
  readonly category = 'NSFW_IMAGE' as const;
  readonly maxBytes: number;
  private readonly threshold: number;
  private readonly maxPixels: number;
  private readonly timeoutMs: number;

  private constructor(
    private readonly pool: WorkerPool<ClassifyRequest, ClassifyResult>,
    options: NsfwImageOptions,
    /** Its workers (at most) and each one's inference threads. */
    readonly shape: ImagePoolShape,
  ) {
    this.maxBytes = options.maxBytes ?? 50 * 1024 * 1024;
    this.threshold = options.threshold ?? 0.5;
    this.maxPixels = options.maxPixels ?? 100_000_000;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** Starts the workers and loads the model in each; fails if the model is missing. */
  static async create(options: NsfwImageOptions = {}): Promise<NsfwImageEngine> {
    const runtime = options.runtime ?? 'onnx';
    const shape = imagePoolShape(runtime, availableParallelism(), {
      workers: options.poolSize ?? 0,
      threads: options.threads ?? 0,
    });
    const settings: ClassifierWorkerSettings = {
      modelDir: options.modelDir ?? defaultModelDir(),
      runtime,
      threads: shape.threads,
    };
    const pool = await WorkerPool.create<ClassifyRequest, ClassifyResult>({
      name: 'nsfw-image',
      script: 'nsfw-image/classifier-worker',
      size: shape.workers,
      workerData: settings,
      log: options.log,
    });
    return new NsfwImageEngine(pool, options, shape);
  }

  wants(contentType: string): boolean {
    return IMAGE_TYPES.has(contentType);
  }

  async examine(content: Buffer, _contentType: string, signal: AbortSignal): Promise<EngineReport> {
    if (content.length > this.maxBytes) {
      throw new Error(`nsfw-image examines at most ${this.maxBytes} bytes`);
    }
    if (isTestSample(content)) {
      return { findings: [NUDITY_FINDING], trace: ['nsfw-image: the image test sample'] };
    }
    const stop = AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]);
    const image = await untilAborted(decodeForModel(content, this.maxPixels), stop);
    const pixels = new Uint8Array(image.pixels); // a copy the worker can own
    const { scores } = await this.pool.run({ pixels }, stop, [pixels.buffer]);
    const nudity = scores.Porn + scores.Hentai;
    return {
      findings: nudity >= this.threshold ? [NUDITY_FINDING] : [],
      trace: [
        `nsfw-image: ${image.format} ${image.width} x ${image.height}: ${scoreLine(scores)}; ` +
          `Porn + Hentai ${nudity.toFixed(3)} (threshold ${this.threshold})`,
      ],
    };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
