import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import type { ContentEngine } from './engine.js';
import { LazyEngine } from './lazy-engine.js';
import type { ImageRuntime } from './nsfw-image/classifier.js';
import { IMAGE_TYPES } from './nsfw-image/image-types.js';
import { imagePoolShape } from './nsfw-image/pool-shape.js';
import { NsfwLanguageEngine } from './nsfw-language/engine.js';
import { isExtractable } from './nsfw-language/extractable.js';

export interface NsfwEngineSettings {
  /** Porn + Hentai probability at which an image is flagged. */
  imageThreshold: number;
  /** What runs the image model. */
  imageRuntime: ImageRuntime;
  /** Inference threads of each image worker's model; 0: sized to the machine. */
  imageThreads: number;
  /** Worker threads per engine; 0: sized to the machine. */
  workers: number;
}

const MiB = 1024 * 1024;
const IMAGE_MAX_BYTES = 50 * MiB;
const LANGUAGE_MAX_BYTES = 20 * MiB;

/** The NSFW_IMAGE and NSFW_LANGUAGE engines; each starts its workers on its first item. */
export function nsfwEngines(settings: NsfwEngineSettings, logger: Logger): ContentEngine[] {
  const log = (message: string) => logger.warn(message);
  const cores = availableParallelism();
  const image = imagePoolShape(settings.imageRuntime, cores, {
    workers: settings.workers,
    threads: settings.imageThreads,
  });
  const languageWorkers = settings.workers || Math.min(cores, 8);
  return [
    new LazyEngine(
      'nsfw-image',
      'NSFW_IMAGE',
      IMAGE_MAX_BYTES,
      (type) => IMAGE_TYPES.has(type),
      // Imported on the first image: sharp and libvips cost the main thread about 10 MB otherwise.
      async () => {
        const { NsfwImageEngine } = await import('./nsfw-image/engine.js');
        return NsfwImageEngine.create({
          threshold: settings.imageThreshold,
          runtime: settings.imageRuntime,
          threads: image.threads,
          poolSize: image.workers,
          maxBytes: IMAGE_MAX_BYTES,
          log,
        });
      },
    ),
    new LazyEngine('nsfw-language', 'NSFW_LANGUAGE', LANGUAGE_MAX_BYTES, isExtractable, () =>
      NsfwLanguageEngine.create({ poolSize: languageWorkers, maxBytes: LANGUAGE_MAX_BYTES, log }),
    ),
  ];
}
