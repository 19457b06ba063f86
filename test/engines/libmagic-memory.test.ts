import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
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
