import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { type MultipartLimits, multipartParts } from '../../src/http/multipart-reader.js';
import { workerCodeOf } from './entry.js';
import { END, file, pieces } from './multipart-bodies.js';

const LIMITS: MultipartLimits = {
  bodyBytes: 1 << 26,
  fieldBytes: 1024,
  fields: 20,
  parts: 1 << 20,
};

/** Hostile bodies by name: how to make one of about `size` bytes, and the pieces it arrives in. */
const HOSTILE: Array<[string, (size: number) => Buffer, number[]]> = [
  ['delimiter prefixes', (n) => Buffer.from(file('\r\n--XY'.repeat(n / 6)) + END), [1 << 16]],
  [
    'delimiter prefixes, in 5-byte pieces',
    (n) => Buffer.from(file('\r\n--XY'.repeat(n / 6)) + END),
    [5],
  ],
  ['carriage returns', (n) => Buffer.from(file('\r'.repeat(n)) + END), [1 << 16]],
  ['carriage returns, a byte at a time', (n) => Buffer.from(file('\r'.repeat(n)) + END), [1]],
  ['a header trickled', (n) => Buffer.from(`--XYZ\r\nX: ${'\r'.repeat(Math.min(n, 15_000))}`), [1]],
  ['empty parts', (n) => Buffer.from(`--XYZ\r\n\r\n\r\n`.repeat(n / 11) + END), [1 << 16]],
];

export interface BodyTiming {
  what: string;
  /** The best of five reads of a body of about 2,000 bytes, ms. */
  small: number;
  /** The same of about 32,000 bytes. */
  large: number;
}

/** Reads `body` to its end (bytes counted, not kept: kept, they would be garbage to collect). */
async function drain(body: Buffer, sizes: number[]): Promise<void> {
  try {
    for await (const part of multipartParts(pieces(body, sizes), 'XYZ', LIMITS)) {
      if (part.kind === 'file') for await (const _ of part.content);
    }
  } catch {
    // a refusal is an outcome too: only the time matters here
  }
}

async function measure(): Promise<BodyTiming[]> {
  const timings: BodyTiming[] = [];
  for (const [what, make, sizes] of HOSTILE) {
    const [smallBody, largeBody] = [make(2_000), make(32_000)];
    // The best of five rounds each, the two sizes taking turns: a busy moment costs both.
    let small = Number.POSITIVE_INFINITY;
    let large = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 5; round++) {
      let started = performance.now();
      await drain(smallBody, sizes);
      small = Math.min(small, performance.now() - started);
      started = performance.now();
      await drain(largeBody, sizes);
      large = Math.min(large, performance.now() - started);
    }
    timings.push({ what, small, large });
  }
  return timings;
}

/**
 * Times the multipart reader on each hostile body in a worker thread: node:test's own bookkeeping
 * of the test's asynchronous work makes every await inside a test cost more the more there were
 * (a 5-byte-piece body of 32,000 bytes read in 60-100 ms there, ~30x the 2,000-byte one, against
 * 11-13 ms and ~15x in a worker), which is the harness's cost, not the reader's.
 */
export function measureHostileBodiesInWorker(): Promise<BodyTiming[]> {
  const worker = new Worker(workerCodeOf(new URL(import.meta.url).href), {
    eval: true,
    workerData: 'measure-multipart-bodies',
  });
  return new Promise<BodyTiming[]>((resolve, reject) => {
    worker.once('message', (timings: BodyTiming[]) => {
      void worker.terminate();
      resolve(timings);
    });
    worker.once('error', reject);
  });
}

if (!isMainThread && workerData === 'measure-multipart-bodies') {
  const port = parentPort;
  void measure().then((timings) => port?.postMessage(timings));
}
