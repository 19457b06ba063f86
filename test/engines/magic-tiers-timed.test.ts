import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { Libmagic, ReducedTier } from '../../src/engines/libmagic.js';
import { looksBinaryToLibmagic } from '../../src/engines/magic-encoding.js';
import { splitMagic } from '../../src/engines/magic-tiers.js';

// @run-alone: times the tiers' conditions on heads of growing size

/** `check` over `heads(size)` at 256 KiB and 1 MiB (best of 5 rounds each): 4x the size, < 8x the time. */
function assertLinear(heads: (size: number) => Buffer[], check: (head: Buffer) => unknown): void {
  const cost = (size: number) => {
    const hostile = heads(size);
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 5; round++) {
      const started = process.hrtime.bigint();
      for (const head of hostile) check(head);
      best = Math.min(best, Number(process.hrtime.bigint() - started));
    }
    return best;
  };
  cost(64 * 1024);
  const small = cost(256 * 1024);
  const large = cost(1024 * 1024);
  assert.ok(large < small * 8, `4x the head cost ${(large / small).toFixed(1)}x the time`);
}

/**
 * The conditions that pick libmagic's tier (src/engines/magic-tiers.ts) read every head that is
 * not UTF-8 text, up to SNIFF_BYTES (1 MiB): linear in it, whatever the bytes.
 */
describe('libmagic tiers on hostile heads', () => {
  test('the conditions run in linear time on hostile heads', async () => {
    const tiers = splitMagic(await Libmagic.bundledDatabase());
    assert.ok(tiers !== null);
    // Random heads (no condition holds: every search scans its window), and heads of one byte
    // or two repeated (each a candidate start for the folded searches).
    const heads = (size: number) => [
      randomBytes(size),
      Buffer.alloc(size, 'q'),
      Buffer.alloc(size, 'iI'),
      Buffer.alloc(size, '%P'),
    ];
    assertLinear(heads, (head) => tiers.mayMatchRemoved(head));
  });

  test('the proof that a head is binary runs in linear time on hostile heads', () => {
    // All NULs (trimmed from the end, the whole head), text (read up to 64 KiB), text before
    // trailing NULs, and a byte that only one of the two tables refuses, repeated.
    const heads = (size: number) => [
      Buffer.alloc(size),
      Buffer.alloc(size, 'a'),
      Buffer.concat([Buffer.alloc(size / 2, 'b'), Buffer.alloc(size / 2)]),
      Buffer.alloc(size, 0x7f),
    ];
    assertLinear(heads, looksBinaryToLibmagic);
  });

  test("the reduced tier's answers run in linear time on hostile binary heads", async () => {
    // It answers on the event loop (content-type.ts), so its time must follow the head's size.
    const reduced = await ReducedTier.create();
    assert.ok(reduced !== null);
    // Heads it answers itself (proved binary, no removed test can match): random bytes, three
    // bytes repeated, and a binary opening before newlines (the kept tests' searches and regexes
    // read their windows; the slowest seen, ~0.7 ms a 1 MiB head).
    const opening = Buffer.from([0x02, 0x9c, 0x11]);
    const heads = (size: number) => [
      randomBytes(size),
      Buffer.alloc(size, opening),
      Buffer.concat([opening, Buffer.alloc(size - opening.length, '\n')]),
    ];
    for (const head of heads(4096)) assert.notEqual(reduced.detect(head), null);
    assertLinear(heads, (head) => reduced.detect(head));
  });
});
