/**
 * Async work end to end against the sync path, on the same SQLite service, rounds alternating:
 * `count` fresh 4 KB files submitted at concurrency `concurrency` to POST /files (sync: each
 * answer is the result) and to POST /files/async (no callback; done when the store holds every
 * item's result: accepted, scanned, recorded). Reported per path: items per second and Assay's
 * CPU per item; and the ratio async/sync of the best rounds (issue 28's target: >= 0.7).
 *
 * The results are counted in the service's own SQLite file, read-only, every 20 ms: no request
 * of the bench's own loads the service it measures.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { uploadToAssay } from './clients.js';
import { cpuSeconds } from './service-process.js';
import { median, runConcurrently } from './stats.js';
import { tagContent } from './unique-content.js';

export async function benchAsyncEndToEnd(options: {
  url: string;
  pid: number;
  dataDir: string;
  count: number;
  concurrency: number;
  rounds: number;
}): Promise<string[]> {
  const { url, pid, count, concurrency, rounds } = options;
  const database = new SQLite(join(options.dataDir, 'assay.db'), {
    readonly: true,
    fileMustExist: true,
  });
  const results = database.prepare('select count(*) as n from files');
  const resultCount = () => (results.get() as { n: number }).n;
  const contents = Array.from({ length: 64 }, () => randomBytes(4096));
  let serial = 0;
  const fresh = (i: number) => {
    const content = contents[i % contents.length] as Buffer;
    return tagContent(content, i, serial++);
  };
  const best = { sync: 0, async: 0 };
  const cpu: { sync: number[]; async: number[] } = { sync: [], async: [] };
  const lines: string[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      for (const path of ['sync', 'async'] as const) {
        const before = resultCount();
        const cpuBefore = cpuSeconds(pid);
        const started = performance.now();
        await runConcurrently(count, concurrency, (i) =>
          path === 'sync'
            ? uploadToAssay(url, fresh(i))
            : uploadToAssay(url, fresh(i), { path: '/v2.2/files/async', status: 202 }),
        );
        const acceptedSeconds = (performance.now() - started) / 1000;
        const deadline = performance.now() + 120_000;
        while (resultCount() < before + count) {
          if (performance.now() > deadline) throw new Error('async results did not all come');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const seconds = (performance.now() - started) / 1000;
        const cpuMs = ((cpuSeconds(pid) - cpuBefore) * 1000) / count;
        const perSecond = count / seconds;
        best[path] = Math.max(best[path], perSecond);
        cpu[path].push(cpuMs);
        const accepted =
          path === 'async' ? ` (accepted at ${(count / acceptedSeconds).toFixed(1)}/s)` : '';
        console.log(
          `  round ${round + 1} ${path.padEnd(5)} ${perSecond.toFixed(1).padStart(8)} items/s${accepted}  assay cpu ${cpuMs.toFixed(2)} ms/item`,
        );
      }
    }
  } finally {
    database.close();
  }
  lines.push(
    `4 KB at concurrency ${concurrency}, SQLite, async end to end (accepted, scanned, recorded; ` +
      `no callback) against sync: ${(best.async / best.sync).toFixed(2)} of sync's items/s ` +
      `(best rounds: sync ${best.sync.toFixed(1)}/s, async ${best.async.toFixed(1)}/s); ` +
      `assay cpu ms/item (median of rounds): sync ${median(cpu.sync).toFixed(2)}, async ` +
      `${median(cpu.async).toFixed(2)}`,
  );
  return lines;
}
