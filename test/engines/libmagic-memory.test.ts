import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { spawnContentTypeWorker } from '../../src/engines/content-type.js';
import { Libmagic } from '../../src/engines/libmagic.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

test('libmagic in two tiers keeps no copy of the compiled database in JavaScript memory', async () => {
  gc();
  const before = process.memoryUsage().arrayBuffers;
  const magic = await Libmagic.create();
  assert.notEqual(magic.split, null, 'split in two tiers');
  // Backing stores are released after the collection that finds them dead, not during it.
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(100);
  }
  const kept = process.memoryUsage().arrayBuffers - before;
  // The database is 10.8 MB; what libmagic loaded lives in its WASM memory, not here. A closure
  // of the split that shared its scope kept the whole of it for the life of the process.
  assert.ok(kept < 4_000_000, `${(kept / 1e6).toFixed(1)} MB of buffers kept`);
  assert.equal(magic.detect(Buffer.from('%PDF-1.7\n')), 'application/pdf');
});

test("libmagic's worker thread keeps none of its start's buffers", async () => {
  const worker = spawnContentTypeWorker({ failStart: false, tiered: true });
  try {
    await new Promise<void>((resolve, reject) => {
      worker.on('message', (message: { ready?: boolean }) => message.ready && resolve());
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the worker exited (${code}) before ready`)));
    });
    await sleep(500); // backing stores are released after the collection that found them dead
    const { external_memory } = await worker.getHeapStatistics();
    // Its two WASM memories and what libmagic's wrapper keeps: ~85 MB. Without a collection after
    // the start, wasmagic's binary as read (12 MB) stayed too: an idle thread never starts one.
    assert.ok(external_memory < 90e6, `${(external_memory / 1e6).toFixed(1)} MB external`);
  } finally {
    await worker.terminate();
  }
});
