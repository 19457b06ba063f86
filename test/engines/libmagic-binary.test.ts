import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import libmagicWrapper from 'wasmagic/dist/libmagic-wrapper.js';
import { libmagicBinary } from '../../src/engines/libmagic.js';
import { stripEmbeddedFile } from '../../src/engines/libmagic-binary.js';

const createModule = libmagicWrapper.default;
const wasmPath = createRequire(import.meta.url).resolve('wasmagic/dist/libmagic-wrapper.wasm');
const DATABASE = '/magic/magic.mgc';

describe("libmagic's binary without its embedded database", () => {
  test('gives the database wasmagic embeds, and a binary whose instances hold none of it', async () => {
    const original = readFileSync(wasmPath);
    const { binary, file } = stripEmbeddedFile(original, DATABASE);
    const embedded = (await createModule({})).FS.readFile(DATABASE);
    assert.equal(file.length, embedded.length);
    assert.ok(Buffer.from(file).equals(Buffer.from(embedded)), 'the same bytes');
    assert.ok(binary.length < original.length / 2, `${binary.length} of ${original.length} bytes`);
    // An instance of the stripped binary starts, and its embedded file is zeros but for a segment
    // that begins before it: the pages that held it are never written.
    const stripped = await createModule({ wasmBinary: binary });
    const left: Uint8Array = stripped.FS.readFile(DATABASE);
    assert.equal(left.length, embedded.length);
    const written = left.reduce((count, byte) => count + (byte === 0 ? 0 : 1), 0);
    assert.ok(written < 4096, `${written} bytes of the file are still written`);
    // What the service loads is that pair.
    const used = libmagicBinary();
    assert.ok(used.binary !== null && Buffer.from(used.binary).equals(Buffer.from(binary)));
  });

  test('a binary it does not understand is refused, not half read', () => {
    const original = readFileSync(wasmPath);
    assert.throws(() => stripEmbeddedFile(original.subarray(0, original.length / 2), DATABASE));
    assert.throws(() => stripEmbeddedFile(original, '/magic/not-there.mgc'), /no embedded file/);
    assert.throws(() => stripEmbeddedFile(Buffer.alloc(64), DATABASE));
  });
});
