import '../helpers/loopback-only.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { PerformanceObserver, constants as perfConstants } from 'node:perf_hooks';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { COLLECT_EVERY_BYTES, noteStreamedBytes } from '../../src/stream-memory.js';
import { multipartFile } from '../helpers/raw-http.js';
import { buildService, useSharedClamd } from '../helpers/service.js';

const clamd = useSharedClamd();
const MiB = 1024 * 1024;

/** Young-generation collections that start while `work` runs. */
async function minorCollectionsDuring(work: () => void): Promise<number> {
  let count = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // Node's GC entries carry their kind in `detail`, which PerformanceEntry's type leaves out.
      const { detail } = entry as PerformanceEntry & { detail?: { kind?: number } };
      if (detail?.kind === perfConstants.NODE_PERFORMANCE_GC_MINOR) count++;
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  work();
  // GC entries are delivered asynchronously.
  await sleep(50);
  observer.disconnect();
  return count;
}

test('streamed content starts a young-generation collection every COLLECT_EVERY_BYTES', async () => {
  // Start from a collection, so that only the ones asked for follow.
  noteStreamedBytes(COLLECT_EVERY_BYTES);
  assert.equal(await minorCollectionsDuring(() => noteStreamedBytes(COLLECT_EVERY_BYTES - 1)), 0);
  assert.equal(await minorCollectionsDuring(() => noteStreamedBytes(1)), 1);
  const collections = await minorCollectionsDuring(() => {
    for (let i = 0; i < 3 * 128; i++) noteStreamedBytes(COLLECT_EVERY_BYTES / 128);
  });
  assert.equal(collections, 3);
});

test('a 96 MB upload leaves at most a few MB of dead network buffers, not 64 MB', async (t) => {
  const svc = await buildService(t, { ASSAY_CLAMD: clamd.socket });
  // One random MiB sent 96 times: the client holds no more than it, so what the process's
  // ArrayBuffers grow by is the service's (its 64 KB reads, the head held for libmagic).
  const block = randomBytes(MiB);
  const blocks = 96;
  const form = multipartFile(block);
  const before = process.memoryUsage().arrayBuffers;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().arrayBuffers);
  }, 2);
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(`${svc.url}/v2.2/files`, {
      method: 'POST',
      headers: {
        authorization: svc.auth,
        'content-type': form.contentType,
        'content-length': form.length + (blocks - 1) * block.length,
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    const send = async () => {
      req.write(form.before);
      for (let i = 0; i < blocks; i++) {
        if (!req.write(block)) await new Promise((drained) => req.once('drain', drained));
      }
      req.end(form.after);
    };
    send().catch(reject);
  });
  clearInterval(sampler);
  assert.equal(answer.status, 201, answer.body);
  const result = JSON.parse(answer.body) as { content_length: number; findings: string[] };
  assert.equal(result.content_length, blocks * MiB);
  assert.deepEqual(result.findings, []);
  const grewBy = (peak - before) / MiB;
  // Without a collection every 8 MiB the reads piled up to V8's own trigger, 64 MB or more.
  assert.ok(grewBy < 32, `ArrayBuffers grew by ${grewBy.toFixed(1)} MB during the upload`);
});
