/**
 * Photo-like 1 and 2 MP JPEGs uploaded synchronously: HTTP, hashing, clamd and the image engine
 * (decode and inference in its workers) end to end. The first upload starts the engine's workers.
 */
import { photoLike } from '../test/helpers/images.js';
import { uploadToAssay } from './clients.js';
import { JPEG_SIZES, photoSet } from './nsfw.js';
import { runConcurrently, summarise } from './stats.js';

const IMAGE_UPLOADS = Number(process.env.BENCH_IMAGE_UPLOADS ?? 100);

export async function benchImagesOverHttp(url: string): Promise<string[]> {
  const lines: string[] = [];
  const started = performance.now();
  await uploadToAssay(url, await photoLike(640, 480, 99));
  lines.push(
    `first image (starts the nsfw-image workers): ${(performance.now() - started).toFixed(0)} ms`,
  );
  for (const [label, width, height] of JPEG_SIZES) {
    const { images, size } = await photoSet(width, height);
    const upload = (i: number) => uploadToAssay(url, images[i % images.length] as Buffer);
    await runConcurrently(8, 2, upload); // warm-up
    for (const concurrency of [1, 2]) {
      const { latencies, seconds } = await runConcurrently(IMAGE_UPLOADS, concurrency, upload);
      const stats = summarise(latencies, seconds, size);
      lines.push(
        `${label} JPEG over HTTP, concurrency ${concurrency}: ${stats.perSecond.toFixed(1)} images/s, ` +
          `p50 ${stats.p50.toFixed(1)} ms, p99 ${stats.p99.toFixed(1)} ms`,
      );
    }
  }
  return lines;
}
