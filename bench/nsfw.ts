/**
 * The NSFW engines on their own, in this process (no HTTP): image throughput and latency for
 * photo-like 1 and 2 MP JPEGs, decode and inference included, on both runtimes (onnx, tfjs) side
 * by side; memory after 1,000 images; language throughput on 10 MB of text.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ImageRuntime } from '../src/engines/nsfw-image/classifier.js';
import { NsfwLanguageEngine } from '../src/engines/nsfw-language/engine.js';
import { photoLike } from '../test/helpers/images.js';

const MB = 1024 * 1024;
export const MEMORY_IMAGES = Number(process.env.BENCH_NSFW_MEMORY_IMAGES ?? 1000);

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

/** What one runtime's child process measured (bench/nsfw-image-child.ts). */
export interface RuntimeFigures {
  loadMs: number;
  lines: string[];
  p50OneAtATime: number;
  perSecond: number;
  rss: { before: number; warmed: number; after: number };
  /** Images examined at once in the throughput rounds: one per core. */
  concurrency: number;
  /** The engine's pool, as the service sizes it on this machine. */
  workers: number;
  threads: number;
}

/**
 * Both runtimes of the image engine side by side, each in a fresh process of its own (so that the
 * memory figures are the runtime's, not what the other left behind), each with the pool the
 * service gives it on this machine (imagePoolShape), over the same photo-like JPEGs.
 */
export async function benchNsfwImage(): Promise<string[]> {
  const lines: string[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'assay-bench-images-'));
  try {
    for (const [label, width, height] of JPEG_SIZES) {
      const { images } = await photoSet(width, height);
      for (const [i, image] of images.entries()) {
        writeFileSync(join(dir, `${label.replace(' ', '')}-${i}.jpg`), image);
      }
    }
    const figures: Partial<Record<ImageRuntime, RuntimeFigures>> = {};
    for (const runtime of ['onnx', 'tfjs'] as const) {
      const out = execFileSync(
        process.execPath,
        ['--import', 'tsx', 'bench/nsfw-image-child.ts', runtime, dir],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20 },
      );
      const measured = JSON.parse(out.trim().split('\n').pop() ?? '{}') as RuntimeFigures;
      figures[runtime] = measured;
      const { rss, workers, threads } = measured;
      lines.push(
        `-- runtime ${runtime}: ${workers} worker(s) of ${threads} inference thread(s); model ` +
          `loaded in its first worker in ${measured.loadMs.toFixed(0)} ms`,
        ...measured.lines,
        `RSS of the process and its ${workers} worker(s): ${rss.before.toFixed(0)} MB before the ` +
          `engine, ${rss.warmed.toFixed(0)} MB warmed up, ${rss.after.toFixed(0)} MB after ` +
          `${MEMORY_IMAGES} more 1 MP images (${((rss.after - rss.before) / workers).toFixed(0)} MB ` +
          `per worker)`,
      );
    }
    const { onnx, tfjs } = figures;
    if (onnx !== undefined && tfjs !== undefined) {
      lines.push(
        `onnx against tfjs, 1 MP JPEG: p50 one at a time ${onnx.p50OneAtATime.toFixed(1)} ms ` +
          `against ${tfjs.p50OneAtATime.toFixed(1)} ms; images/s at concurrency ${onnx.concurrency} ` +
          `${(onnx.perSecond / tfjs.perSecond).toFixed(2)}x; RSS of the process and its workers ` +
          `after the 1,000 images ${(onnx.rss.after / tfjs.rss.after).toFixed(2)}x of tfjs's`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
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
