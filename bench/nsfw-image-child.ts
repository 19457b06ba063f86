/**
 * One runtime of the image engine measured in a process of its own (bench/nsfw.ts runs one per
 * runtime): `node --import tsx bench/nsfw-image-child.ts <onnx|tfjs> <dir of JPEGs>`. Prints its
 * figures as one line of JSON (RuntimeFigures); progress goes to stderr.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { IMAGE_RUNTIMES, type ImageRuntime } from '../src/engines/nsfw-image/classifier.js';
import { NsfwImageEngine } from '../src/engines/nsfw-image/engine.js';
import { JPEG_SIZES, MEMORY_IMAGES, type RuntimeFigures } from './nsfw.js';
import { runConcurrently, summarise } from './stats.js';

const IMAGES = Number(process.env.BENCH_NSFW_IMAGES ?? 200);
const [runtime, dir] = process.argv.slice(2) as [ImageRuntime, string];
if (!IMAGE_RUNTIMES.includes(runtime) || dir === undefined) {
  throw new Error('usage: nsfw-image-child.ts <onnx|tfjs> <dir of JPEGs>');
}

const rssMb = () => process.memoryUsage().rss / (1024 * 1024);
const signal = () => AbortSignal.timeout(120_000);
const files = readdirSync(dir);
const setOf = (label: string) =>
  files.filter((f) => f.startsWith(label.replace(' ', ''))).map((f) => readFileSync(join(dir, f)));

// Images at once: one per core. The engine sizes its pool to the machine, as in the service.
const concurrency = availableParallelism();
const rssBefore = rssMb();
const started = performance.now();
const engine = await NsfwImageEngine.create({ runtime });
const figures: RuntimeFigures = {
  loadMs: 0,
  lines: [],
  p50OneAtATime: 0,
  perSecond: 0,
  rss: { before: rssBefore, warmed: 0, after: 0 },
  concurrency,
  workers: engine.shape.workers,
  threads: engine.shape.threads,
};
try {
  const first = setOf('1 MP')[0] as Buffer;
  await engine.examine(first, 'image/jpeg', signal());
  figures.loadMs = performance.now() - started;
  for (const [label] of JPEG_SIZES) {
    const images = setOf(label);
    const size = images.reduce((sum, image) => sum + image.length, 0) / images.length;
    const examine = async (i: number) => {
      const report = await engine.examine(
        images[i % images.length] as Buffer,
        'image/jpeg',
        signal(),
      );
      if (report.findings.length > 0) throw new Error(`a neutral ${label} image was flagged`);
    };
    // Warm-up: every worker started.
    await runConcurrently(concurrency * 4, Math.max(concurrency, figures.workers), examine);
    for (const atOnce of [1, concurrency]) {
      const { latencies, seconds } = await runConcurrently(IMAGES, atOnce, examine);
      const stats = summarise(latencies, seconds, size);
      if (label === '1 MP' && atOnce === 1) figures.p50OneAtATime = stats.p50;
      if (label === '1 MP' && atOnce === concurrency) figures.perSecond = stats.perSecond;
      figures.lines.push(
        `${label} JPEG (${(size / 1024).toFixed(0)} KB), concurrency ${atOnce}: ` +
          `${stats.perSecond.toFixed(1)} images/s, p50 ${stats.p50.toFixed(1)} ms, ` +
          `p99 ${stats.p99.toFixed(1)} ms`,
      );
    }
  }
  figures.rss.warmed = rssMb();
  const images = setOf('1 MP');
  await runConcurrently(MEMORY_IMAGES, concurrency, async (i) => {
    await engine.examine(images[i % images.length] as Buffer, 'image/jpeg', signal());
  });
  figures.rss.after = rssMb();
} finally {
  await engine.close();
}
console.log(JSON.stringify(figures));
