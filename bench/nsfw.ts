/**
 * The NSFW engines on their own, in this process (no HTTP): image throughput and latency for
 * photo-like 1 and 2 MP JPEGs, decode and inference included; memory after 1,000 images; language
 * throughput on 10 MB of text.
 */
import { availableParallelism } from 'node:os';
import { NsfwImageEngine } from '../src/engines/nsfw-image/engine.js';
import { NsfwLanguageEngine } from '../src/engines/nsfw-language/engine.js';
import { photoLike } from '../test/helpers/images.js';
import { runConcurrently, summarise } from './stats.js';

const MB = 1024 * 1024;
const IMAGES = Number(process.env.BENCH_NSFW_IMAGES ?? 200);
const MEMORY_IMAGES = Number(process.env.BENCH_NSFW_MEMORY_IMAGES ?? 1000);

function rssMb(): number {
  return process.memoryUsage().rss / MB;
}

const signal = () => AbortSignal.timeout(120_000);

/** 1 MP = 1155 x 866, 2 MP = 1633 x 1225 (4:3). */
export const JPEG_SIZES = [
  ['1 MP', 1155, 866],
  ['2 MP', 1633, 1225],
] as const;

/** Eight different photo-like JPEG scenes of one size, and their mean size in bytes. */
export async function photoSet(
  width: number,
  height: number,
): Promise<{ images: Buffer[]; size: number }> {
  const images = await Promise.all(
    Array.from({ length: 8 }, (_, seed) => photoLike(width, height, seed)),
  );
  return { images, size: images.reduce((sum, image) => sum + image.length, 0) / images.length };
}

export async function benchNsfwImage(): Promise<string[]> {
  const lines: string[] = [];
  const workers = availableParallelism();
  const started = performance.now();
  const engine = await NsfwImageEngine.create({ poolSize: workers });
  lines.push(
    `model loaded in ${workers} workers (in parallel) in ${(performance.now() - started).toFixed(0)} ms`,
  );
  try {
    for (const [label, width, height] of JPEG_SIZES) {
      const { images, size } = await photoSet(width, height);
      const examine = async (i: number) => {
        const report = await engine.examine(
          images[i % images.length] as Buffer,
          'image/jpeg',
          signal(),
        );
        if (report.findings.length > 0) throw new Error(`a neutral ${label} image was flagged`);
      };
      await runConcurrently(workers * 2, workers, examine); // warm-up
      for (const concurrency of [1, workers]) {
        const { latencies, seconds } = await runConcurrently(IMAGES, concurrency, examine);
        const stats = summarise(latencies, seconds, size);
        lines.push(
          `${label} JPEG (${(size / 1024).toFixed(0)} KB), concurrency ${concurrency}: ` +
            `${stats.perSecond.toFixed(1)} images/s, p50 ${stats.p50.toFixed(1)} ms, p99 ${stats.p99.toFixed(1)} ms`,
        );
      }
    }
    const images = await Promise.all(
      Array.from({ length: 8 }, (_, seed) => photoLike(1155, 866, seed)),
    );
    const before = rssMb();
    await runConcurrently(MEMORY_IMAGES, workers, async (i) => {
      await engine.examine(images[i % images.length] as Buffer, 'image/jpeg', signal());
    });
    lines.push(
      `RSS (process and its workers) ${before.toFixed(0)} MB before ${MEMORY_IMAGES} more ` +
        `1 MP images, ${rssMb().toFixed(0)} MB after`,
    );
  } finally {
    await engine.close();
  }
  return lines;
}

/** About `bytes` of prose in English, German, French and Spanish, an obscenity now and then. */
function mixedText(bytes: number): Buffer {
  const sentences = [
    'The committee reviewed the quarterly figures and agreed to publish them next week.',
    'Der Bericht wurde gestern veröffentlicht und enthält viele Zahlen zur Entwicklung.',
    'Le rapport annuel présente les résultats et les perspectives pour la région.',
    'El informe describe los avances del proyecto durante el último trimestre.',
    'Honestly, this whole shit show has to stop before the deadline.',
  ];
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes; i++) {
    const sentence = sentences[i % sentences.length] as string;
    parts.push(sentence);
    length += Buffer.byteLength(sentence) + 1;
  }
  return Buffer.from(parts.join('\n'));
}

export async function benchNsfwLanguage(): Promise<string[]> {
  const lines: string[] = [];
  const engine = await NsfwLanguageEngine.create({ poolSize: 1, maxBytes: 32 * MB });
  try {
    const text = mixedText(10 * MB);
    const runs: number[] = [];
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      const report = await engine.examine(text, 'text/plain', signal());
      runs.push((performance.now() - started) / 1000);
      if (round === 0)
        lines.push(`findings: ${report.findings.join(', ')}; ${report.trace[1] ?? ''}`);
    }
    const best = Math.min(...runs);
    lines.push(
      `10 MB of text: ${(text.length / MB / best).toFixed(1)} MB/s (best of 3: ${best.toFixed(2)} s)`,
    );
  } finally {
    await engine.close();
  }
  return lines;
}
