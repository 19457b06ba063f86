/**
 * `images-fuzzy` in `npm run bench`: 1 MP photo-like JPEGs through the API at concurrency 2,
 * against two services side by side, each with its own managed clamd: ScanImageFuzzyHash on (the
 * default) and off (ASSAY_CLAMD_IMAGE_FUZZY_HASH=no). Rounds alternate; every upload is a new
 * image (neither clamd's cache of clean verdicts nor Assay's verdict cache answers). Reports
 * images/s and the CPU per image of each service and of its clamd.
 */
import { join } from 'node:path';
import { photoLike } from '../test/helpers/images.js';
import { uploadToAssay } from './clients.js';
import { JPEG_SIZES } from './nsfw.js';
import { cpuSeconds, startAssay, startBenchClamd } from './service-process.js';
import { median, runConcurrently } from './stats.js';

const IMAGES_PER_ROUND = Number(process.env.BENCH_IMAGE_UPLOADS ?? 60);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Side {
  name: string;
  url: string;
  pids: { assay: number; clamd: number };
  stop(): Promise<void>;
  perSecond: number[];
  assayCpu: number[];
  clamdCpu: number[];
}

async function startSide(dir: string, imageFuzzyHash: boolean): Promise<Side> {
  const name = imageFuzzyHash ? 'fuzzy hash on' : 'fuzzy hash off';
  const home = join(dir, imageFuzzyHash ? 'on' : 'off');
  const clamd = await startBenchClamd(home, { imageFuzzyHash });
  const assay = await startAssay(clamd.socket, join(home, 'assay'));
  return {
    name,
    url: assay.url,
    pids: { assay: assay.child.pid ?? 0, clamd: clamd.pid },
    async stop() {
      assay.child.kill('SIGTERM');
      if (assay.child.exitCode === null) await new Promise((r) => assay.child.once('exit', r));
      await clamd.clamd.stop();
    },
    perSecond: [],
    assayCpu: [],
    clamdCpu: [],
  };
}

export async function benchImageFuzzyHash(dir: string): Promise<string[]> {
  const [, width, height] = JPEG_SIZES[0];
  let seed = 1000;
  const fresh = () =>
    Promise.all(Array.from({ length: IMAGES_PER_ROUND }, () => photoLike(width, height, seed++)));
  const sides = [await startSide(dir, true), await startSide(dir, false)];
  try {
    // The first image starts each service's image engine workers.
    for (const side of sides)
      for (const image of await fresh()) await uploadToAssay(side.url, image);
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const images = await fresh();
        const before = [cpuSeconds(side.pids.assay), cpuSeconds(side.pids.clamd)];
        const { seconds } = await runConcurrently(images.length, 2, (i) =>
          uploadToAssay(side.url, images[i] as Buffer),
        );
        const [assay, clamd] = [cpuSeconds(side.pids.assay), cpuSeconds(side.pids.clamd)].map(
          (after, i) => ((after - (before[i] ?? 0)) * 1000) / images.length,
        ) as [number, number];
        side.perSecond.push(images.length / seconds);
        side.assayCpu.push(assay);
        side.clamdCpu.push(clamd);
        console.log(
          `  round ${round + 1} ${side.name.padEnd(15)} ${(images.length / seconds).toFixed(1).padStart(6)} images/s` +
            `  cpu ms/image: assay ${assay.toFixed(1)}  clamd ${clamd.toFixed(1)}`,
        );
      }
    }
  } finally {
    for (const side of sides) await side.stop();
  }
  const [on, off] = sides as [Side, Side];
  const line = (side: Side) =>
    `${side.name}: ${median(side.perSecond).toFixed(1)} images/s, cpu ms/image assay ` +
    `${median(side.assayCpu).toFixed(1)}, clamd ${median(side.clamdCpu).toFixed(1)}`;
  return [
    `1 MP JPEGs over HTTP at concurrency 2, medians of ${ROUNDS} rounds: ${line(on)}; ${line(off)}; ` +
      `off/on ${(median(off.perSecond) / median(on.perSecond)).toFixed(2)}x the images/s`,
  ];
}
