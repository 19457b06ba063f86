/**
 * Two tiers of libmagic's database, so that content no magic test recognises costs a fraction of
 * a full walk, with exactly the answer of the full walk.
 *
 * libmagic tries its ~3,900 top-level tests in order until one matches; content that matches
 * none (random, encrypted or compressed data of no known format) pays for all of them: about
 * 0.3 ms per 4 KB and 0.7 ms per 64 KB here, most of it in `search` tests. Most top-level tests
 * are binary tests of bytes at a fixed offset, or a string searched for in a fixed range: a cheap
 * necessary condition in JavaScript says when such a test cannot match. `splitMagic` parses the
 * compiled database (magic.mgc, format 21) into those "removable" tests and the rest, and builds
 * a reduced database without the removable ones. When no removable test's condition holds for a
 * head, libmagic with the reduced database walks the same tests that could match, in the same
 * order, so it answers what the full database would; otherwise the full database answers.
 *
 * What keeps that exact (file's softmagic.c and apprentice.c, format 21):
 * - a top-level test that fails skips its continuations, and a removed test's condition is
 *   necessary for it to pass (a read past the end fails too, as in libmagic's `mget`);
 * - only tests of libmagic's binary pass (BINTEST) are removed, and the reduced tier only sees
 *   heads proved binary (magic-encoding.ts), for which libmagic runs no text pass: a test it also
 *   runs as text (on its UTF-8 conversion, which these conditions do not see) only runs on the
 *   raw bytes there;
 * - `indirect` runs the whole database again at an offset: a kept entry that reaches one, itself
 *   or through `use`, would run the reduced database there, so `splitMagic` refuses to split
 *   (null: the full database answers everything) rather than risk a different answer;
 * - named entries (`name`, set 1) are kept whole, those the kept tests can reach through `use`.
 * The conditions themselves are in magic-conditions.ts. `test/engines/magic-tiers.test.ts`
 * compares both paths over a corpus of formats and mutations.
 */

import {
  type Condition,
  FIELD,
  FILE_STRING,
  INTEGER_TYPES,
  integerCondition,
  regexCondition,
  stringCondition,
} from './magic-conditions.js';

const ENTRY_BYTES = 432;
const MAGIC_NUMBER = 0xf11e041c;
const FORMAT_VERSION = 21;

const INDIR = 0x01;
const OFFADD = 0x02;
const INDIROFFADD = 0x04;
const BINTEST = 0x20;
const OFFNEGATIVE = 0x80;

const FILE_SEARCH = 20;
const FILE_REGEX = 17;
const FILE_INDIRECT = 41;
const FILE_NAME = 45;
const FILE_USE = 46;

interface Entry {
  start: number;
  count: number;
  /** The top-level test's condition, or null when the test must stay in the reduced database. */
  condition: Condition | null;
  /** Conditions indexed by the byte at `offset` (see MagicTiers). */
  keyed: { offset: number; bytes: number[] } | null;
  reachesIndirect: boolean;
  uses: string[];
}

/** A removable test's condition indexed by the byte its test first compares. */
interface KeyedCondition {
  offset: number;
  byByte: Array<Condition[] | undefined>;
}

export interface MagicTiers {
  /** The database without the removable tests: answers when `mayMatchRemoved` is false. */
  reduced: Uint8Array;
  /** Whether any removed test could match `head` (then only the full database may answer). */
  mayMatchRemoved(head: Uint8Array): boolean;
  removed: number;
  kept: number;
}

function nameOf(bytes: Uint8Array, at: number): string {
  const value = bytes.subarray(at + FIELD.value, at + FIELD.value + 128);
  const end = value.indexOf(0);
  return Buffer.from(value.subarray(0, end === -1 ? value.length : end))
    .toString('latin1')
    .replace(/^\^/, ''); // `use ^name` runs the named entry with the byte order swapped
}

/** The entries (a top-level test and its continuations) of one set. */
function readEntries(mgc: DataView, bytes: Uint8Array, first: number, count: number): Entry[] {
  const entries: Entry[] = [];
  for (let index = first; index < first + count; index++) {
    const at = (index + 1) * ENTRY_BYTES;
    const type = mgc.getUint8(at + FIELD.type);
    if (mgc.getUint8(at + FIELD.contLevel) === 0) {
      entries.push({
        start: index,
        count: 0,
        condition: null,
        keyed: null,
        reachesIndirect: false,
        uses: [],
      });
    }
    const entry = entries[entries.length - 1];
    if (entry === undefined) throw new Error('magic database: a continuation before any test');
    entry.count++;
    if (type === FILE_INDIRECT) entry.reachesIndirect = true;
    if (type === FILE_USE) entry.uses.push(nameOf(bytes, at));
  }
  return entries;
}

/**
 * Sets `condition` on an entry whose top-level test runs in the binary pass and has a strong
 * condition; an entry that reaches `indirect` cannot be kept, so it gets any condition there is
 * (`<` and `>`, weak ones), and none means no split.
 */
function classify(mgc: DataView, bytes: Uint8Array, entry: Entry, reachesIndirect: boolean): void {
  const at = (entry.start + 1) * ENTRY_BYTES;
  const flag = mgc.getUint16(at + FIELD.flag, true);
  if ((flag & BINTEST) === 0) return;
  if ((flag & (INDIR | OFFADD | INDIROFFADD | OFFNEGATIVE)) !== 0) return;
  if (mgc.getInt32(at + FIELD.offset, true) < 0) return;
  const type = mgc.getUint8(at + FIELD.type);
  const integer = INTEGER_TYPES[type];
  const found =
    integer !== undefined
      ? integerCondition(mgc, at, integer, reachesIndirect)
      : type === FILE_STRING || type === FILE_SEARCH
        ? stringCondition(mgc, bytes, at, type, reachesIndirect)
        : type === FILE_REGEX
          ? regexCondition(mgc, bytes, at)
          : null;
  if (found === null) return;
  entry.condition = found.condition;
  entry.keyed = found.keyed;
}

/**
 * Splits a compiled magic database; null when its format is not the one understood here, or when
 * a kept entry could reach `indirect` (the full database then answers everything).
 */
export function splitMagic(database: Uint8Array): MagicTiers | null {
  if (database.length < ENTRY_BYTES || database.length % ENTRY_BYTES !== 0) return null;
  const mgc = new DataView(database.buffer, database.byteOffset, database.length);
  if (mgc.getUint32(0, true) !== MAGIC_NUMBER || mgc.getUint32(4, true) !== FORMAT_VERSION) {
    return null;
  }
  const tests = mgc.getUint32(8, true);
  const named = mgc.getUint32(12, true);
  if ((1 + tests + named) * ENTRY_BYTES !== database.length) return null;
  const entries = readEntries(mgc, database, 0, tests);
  const namedEntries = readEntries(mgc, database, tests, named);
  const names = new Map<string, Entry>();
  for (const entry of namedEntries) {
    const at = (entry.start + 1) * ENTRY_BYTES;
    if (mgc.getUint8(at + FIELD.type) === FILE_NAME) names.set(nameOf(database, at), entry);
  }
  const reaches = (entry: Entry, seen: Set<string>): boolean =>
    entry.reachesIndirect ||
    entry.uses.some((name) => {
      if (seen.has(name)) return false;
      seen.add(name);
      const target = names.get(name);
      // A name not found: libmagic's own error; not split, to be safe.
      return target === undefined || reaches(target, seen);
    });
  for (const entry of entries) classify(mgc, database, entry, reaches(entry, new Set()));
  const kept = entries.filter((entry) => entry.condition === null);
  if (kept.some((entry) => reaches(entry, new Set()))) return null;

  const removed = entries.filter((entry) => entry.condition !== null);
  // Named entries run only through `use`: the reduced database keeps those its tests can reach
  // (most of set 1 serves removed tests: 3.3 MB of the 3.8 MB libmagic would hold).
  const reachable = new Set<string>();
  const pending = kept.flatMap((entry) => entry.uses);
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (reachable.has(name)) continue;
    reachable.add(name);
    pending.push(...(names.get(name)?.uses ?? []));
  }
  const namedKept = namedEntries.filter((entry) => {
    const at = (entry.start + 1) * ENTRY_BYTES;
    return mgc.getUint8(at + FIELD.type) !== FILE_NAME || reachable.has(nameOf(database, at));
  });
  const keptTests = kept.reduce((sum, entry) => sum + entry.count, 0);
  const keptNamed = namedKept.reduce((sum, entry) => sum + entry.count, 0);
  const reduced = new Uint8Array((1 + keptTests + keptNamed) * ENTRY_BYTES);
  reduced.set(database.subarray(0, ENTRY_BYTES));
  new DataView(reduced.buffer).setUint32(8, keptTests, true);
  new DataView(reduced.buffer).setUint32(12, keptNamed, true);
  let to = ENTRY_BYTES;
  for (const entry of [...kept, ...namedKept]) {
    const from = (entry.start + 1) * ENTRY_BYTES;
    reduced.set(database.subarray(from, from + entry.count * ENTRY_BYTES), to);
    to += entry.count * ENTRY_BYTES;
  }

  const keyed = new Map<number, KeyedCondition>();
  const unkeyed: Condition[] = [];
  for (const entry of removed) {
    const condition = entry.condition as Condition;
    if (entry.keyed === null) {
      unkeyed.push(condition);
      continue;
    }
    let slot = keyed.get(entry.keyed.offset);
    if (slot === undefined) {
      slot = { offset: entry.keyed.offset, byByte: new Array(256) };
      keyed.set(entry.keyed.offset, slot);
    }
    for (const byte of entry.keyed.bytes) {
      const conditions = slot.byByte[byte] ?? [];
      conditions.push(condition);
      slot.byByte[byte] = conditions;
    }
  }
  return {
    reduced,
    removed: removed.length,
    kept: kept.length,
    mayMatchRemoved: matcherOf([...keyed.values()], unkeyed),
  };
}

/**
 * `mayMatchRemoved`, made outside splitMagic: a closure made there would share its scope, which
 * holds the whole database (10.8 MB) for the life of the process.
 */
function matcherOf(slots: KeyedCondition[], unkeyed: Condition[]): (bytes: Uint8Array) => boolean {
  return (bytes) => {
    const head = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
    // Plain loops: this runs for every head, over ~120 slots and ~80 unkeyed conditions.
    for (const slot of slots) {
      const byte = head[slot.offset];
      if (byte === undefined) continue;
      const conditions = slot.byByte[byte];
      if (conditions === undefined) continue;
      for (const condition of conditions) if (condition(head)) return true;
    }
    for (const condition of unkeyed) if (condition(head)) return true;
    return false;
  };
}
