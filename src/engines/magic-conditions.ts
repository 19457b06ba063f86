/**
 * The necessary conditions of libmagic's top-level tests, in JavaScript (magic-tiers.ts uses them
 * to tell when a removed test cannot match a head): integers at an offset, strings, `search` in a
 * range, and the byte run every match of a `regex` holds. Each reads a head of at most SNIFF_BYTES
 * in time linear in it (magic-tiers-timed.test.ts).
 */

// struct magic (file.h, format 21): byte offsets of its fields.
export const FIELD = {
  flag: 0,
  contLevel: 2,
  reln: 4,
  vallen: 5,
  type: 6,
  maskOp: 9,
  offset: 12,
  mask: 24,
  strRange: 24,
  strFlags: 28,
  value: 32,
} as const;

const UNSIGNED = 0x08;

export const FILE_STRING = 5;

const STRING_COMPACT_WHITESPACE = 1 << 0;
const STRING_COMPACT_OPTIONAL_WHITESPACE = 1 << 1;
const STRING_IGNORE_LOWERCASE = 1 << 2;
const STRING_IGNORE_UPPERCASE = 1 << 3;

/** Byte width and byte order of the integer types a condition can read. */
export const INTEGER_TYPES: Record<number, { width: number; little: boolean }> = {
  1: { width: 1, little: true }, // byte
  2: { width: 2, little: true }, // short (the host's order: WASM is little-endian)
  4: { width: 4, little: true }, // long
  7: { width: 2, little: false }, // beshort
  8: { width: 4, little: false }, // belong
  10: { width: 2, little: true }, // leshort
  11: { width: 4, little: true }, // lelong
  24: { width: 8, little: true }, // quad
  25: { width: 8, little: true }, // lequad
  26: { width: 8, little: false }, // bequad
};

/** A necessary condition of one removable top-level test. */
export type Condition = (head: Buffer) => boolean;

/** A condition, and the byte at an offset its test first compares (to index it by), if any. */
export type FoundCondition = {
  condition: Condition;
  keyed: { offset: number; bytes: number[] } | null;
} | null;

const isSpace = (byte: number) => byte === 0x20 || (byte >= 0x09 && byte <= 0x0d);
const isLower = (byte: number) => byte >= 0x61 && byte <= 0x7a;
const isUpper = (byte: number) => byte >= 0x41 && byte <= 0x5a;

/** The bytes a string test's first character may be, or null when it cannot be told. */
function firstByteChoices(first: number, flags: number): number[] | null {
  const whitespace = STRING_COMPACT_WHITESPACE | STRING_COMPACT_OPTIONAL_WHITESPACE;
  if ((flags & whitespace) !== 0 && isSpace(first)) return null;
  if ((flags & STRING_IGNORE_LOWERCASE) !== 0 && isLower(first)) return [first, first - 0x20];
  if ((flags & STRING_IGNORE_UPPERCASE) !== 0 && isUpper(first)) return [first, first + 0x20];
  return [first];
}

/**
 * What each leading byte of a string test's content may be, position by position, up to the
 * first blank that its whitespace flags let stretch (after it, positions shift).
 */
function leadingChoices(value: Uint8Array, flags: number): number[][] {
  const positions: number[][] = [];
  for (const byte of value) {
    const choices = firstByteChoices(byte, flags);
    if (choices === null) break;
    positions.push(choices);
  }
  return positions;
}

/** The longest run of positions with one choice each: bytes compared exactly, and where. */
function longestExactRun(positions: number[][]): { at: number; bytes: Buffer } {
  let best = { at: 0, length: 0 };
  let start = 0;
  for (let i = 0; i <= positions.length; i++) {
    if (i < positions.length && positions[i]?.length === 1) continue;
    if (i - start > best.length) best = { at: start, length: i - start };
    start = i + 1;
  }
  const bytes = Buffer.from(positions.slice(best.at, best.at + best.length).map((p) => p[0] ?? 0));
  return { at: best.at, bytes };
}

/**
 * A test is removed only if its condition fixes at least this many bits: a weaker one (one byte,
 * a nibble under a mask) holds for one head in 256 or more, would send that many to the full
 * database, and costs the reduced one a single read. An entry reaching `indirect` is removed
 * whatever its strength (it cannot be kept).
 */
const STRONG_BITS = 16;

function popcount(mask: bigint): number {
  let bits = 0;
  for (let rest = mask; rest > 0n; rest >>= 1n) bits += Number(rest & 1n);
  return bits;
}

function readInteger(head: Buffer, offset: number, width: number, little: boolean): bigint {
  let value = 0n;
  for (let i = 0; i < width; i++) {
    const byte = head[little ? offset + width - 1 - i : offset + i] ?? 0;
    value = (value << 8n) | BigInt(byte);
  }
  return value;
}

/**
 * `(the integer at offset & applied) === wanted`, compared a byte at a time (a mask keeps or drops
 * bits of each byte on its own): the same answer as through a BigInt, at a fraction of the cost on
 * every head the worker sees.
 */
function maskedEquals(
  offset: number,
  width: number,
  little: boolean,
  applied: bigint,
  wanted: bigint,
): Condition {
  const masks = new Uint8Array(width);
  const values = new Uint8Array(width);
  for (let i = 0; i < width; i++) {
    // The byte at offset + i holds bits 8i.. (little-endian) or 8(width - 1 - i).. (big).
    const shift = BigInt(8 * (little ? i : width - 1 - i));
    masks[i] = Number((applied >> shift) & 0xffn);
    values[i] = Number((wanted >> shift) & 0xffn);
  }
  return (head) => {
    if (offset + width > head.length) return false;
    for (let i = 0; i < width; i++) {
      if (((head[offset + i] ?? 0) & (masks[i] as number)) !== values[i]) return false;
    }
    return true;
  };
}

/** The condition of an integer test at a fixed offset, or null (kept in the reduced database). */
export function integerCondition(
  mgc: DataView,
  at: number,
  type: { width: number; little: boolean },
  required: boolean,
): FoundCondition {
  const reln = String.fromCharCode(mgc.getUint8(at + FIELD.reln));
  const maskOp = mgc.getUint8(at + FIELD.maskOp);
  const mask = mgc.getBigUint64(at + FIELD.mask, true);
  // Only `&` (mask op 0) or no mask: other operators, `~` and indirect masks stay with libmagic.
  if (maskOp !== 0) return null;
  if (reln !== '=' && !(required && (reln === '<' || reln === '>'))) return null;
  const { width, little } = type;
  const bits = BigInt(width * 8);
  const widthMask = (1n << bits) - 1n;
  const offset = mgc.getInt32(at + FIELD.offset, true);
  const value = mgc.getBigUint64(at + FIELD.value, true);
  const unsigned = (mgc.getUint16(at + FIELD.flag, true) & UNSIGNED) !== 0;
  // libmagic masks the value read with the low `width` bytes of the mask (cvt_8 … cvt_64).
  const applied = mask === 0n ? widthMask : mask & widthMask;
  const read = (head: Buffer) => readInteger(head, offset, width, little) & applied;
  const fits = (head: Buffer) => offset + width <= head.length;
  if (reln === '=') {
    if (!required && popcount(applied) < STRONG_BITS) return null;
    // Equal as 64-bit values implies equal in the low `width` bytes, whatever the sign extension.
    const wanted = value & widthMask;
    const condition = maskedEquals(offset, width, little, applied, wanted);
    // Keyed by the first byte in memory order when the mask keeps all of it.
    const firstShift = little ? 0n : bits - 8n;
    if (((applied >> firstShift) & 0xffn) !== 0xffn) return { condition, keyed: null };
    const first = Number((wanted >> firstShift) & 0xffn);
    return { condition, keyed: { offset, bytes: [first] } };
  }
  // `<` and `>`: as magiccheck compares them, signed unless the test is unsigned.
  const signed = (v: bigint) => BigInt.asIntN(64, unsigned ? v : BigInt.asIntN(Number(bits), v));
  const limit = unsigned ? value : BigInt.asIntN(64, value);
  const compare =
    reln === '<'
      ? (v: bigint) => (unsigned ? v < limit : signed(v) < limit)
      : (v: bigint) => (unsigned ? v > limit : signed(v) > limit);
  return { condition: (head) => fits(head) && compare(read(head)), keyed: null };
}

/** The condition of a string test (`string` at an offset, or `search` in a range), or null. */
export function stringCondition(
  mgc: DataView,
  bytes: Uint8Array,
  at: number,
  type: number,
  required: boolean,
): FoundCondition {
  const reln = String.fromCharCode(mgc.getUint8(at + FIELD.reln));
  const length = mgc.getUint8(at + FIELD.vallen);
  if (reln !== '=' || length === 0) return null;
  const value = bytes.subarray(at + FIELD.value, at + FIELD.value + Math.min(length, 128));
  const flags = mgc.getUint32(at + FIELD.strFlags, true);
  const offset = mgc.getInt32(at + FIELD.offset, true);
  const positions = leadingChoices(value, flags);
  const first = positions[0];
  if (first === undefined) return null;
  if (type === FILE_STRING) {
    // The whole value lies inside the content (mget); its leading bytes compare position by
    // position, and four of them are plenty to rule a test out.
    const leading = positions.slice(0, 4);
    const fixedBits = leading.reduce((bits, choices) => bits + (choices.length === 1 ? 8 : 7), 0);
    if (!required && fixedBits < STRONG_BITS) return null;
    const condition = (head: Buffer) => {
      if (offset + length > head.length) return false;
      for (let i = 0; i < leading.length; i++) {
        if (!(leading[i] as number[]).includes(head[offset + i] ?? -1)) return false;
      }
      return true;
    };
    return { condition, keyed: { offset, bytes: first } };
  }
  // search/N: the value starts at most N bytes after `offset` (anywhere when N is 0).
  const range = mgc.getUint32(at + FIELD.strRange, true);
  const inRange = (head: Buffer) => offset + length <= head.length;
  if (flags === 0) {
    // Compared byte for byte (memmem in libmagic): the same search, natively.
    const needle = Buffer.from(value);
    return {
      condition: (head) => inRange(head) && foundWithin(head, needle, offset, range),
      keyed: null,
    };
  }
  const run = longestExactRun(positions);
  if (run.bytes.length >= 3) {
    // A run of exactly compared bytes `run.at` into the value starts `run.at` after its start.
    return {
      condition: (head) => inRange(head) && foundWithin(head, run.bytes, offset + run.at, range),
      keyed: null,
    };
  }
  const leading = positions.slice(0, 8);
  return {
    condition: (head) => inRange(head) && foundFolded(head, leading, offset, range),
    keyed: null,
  };
}

/** The part of `head` where a search from `from` may find a `length`-byte value start. */
function searchWindow(head: Buffer, from: number, range: number, length: number): Buffer {
  return range === 0 ? head.subarray(from) : head.subarray(from, from + range + length);
}

/** Whether `needle` starts in `head` at most `range` bytes after `from` (anywhere when 0). */
function foundWithin(head: Buffer, needle: Buffer, from: number, range: number): boolean {
  return searchWindow(head, from, range, needle.length).includes(needle);
}

/** Candidates a folded search looks at before it gives up and says it may match. */
const FOLDED_CANDIDATES = 64;

/**
 * Whether bytes matching `leading` (choices per position) start in `head` at most `range` bytes
 * after `from`. Bounded: after FOLDED_CANDIDATES candidate starts it answers true (the full
 * database decides), so content made of the first byte costs no more than a few tests.
 */
function foundFolded(head: Buffer, leading: number[][], from: number, range: number): boolean {
  const window = searchWindow(head, from, range, leading.length);
  const matchesAt = (start: number) =>
    leading.every((choices, i) => choices.includes(window[start + i] ?? -1));
  let candidates = 0;
  for (const byte of leading[0] ?? []) {
    for (let at = window.indexOf(byte); at !== -1; at = window.indexOf(byte, at + 1)) {
      if (++candidates > FOLDED_CANDIDATES || matchesAt(at)) return true;
    }
  }
  return false;
}

/** The index of the `]` ending the bracket expression at `start`, or -1. */
function bracketEnd(pattern: Uint8Array, start: number): number {
  let j = start + 1;
  if (pattern[j] === 0x5e) j++; // [^
  if (pattern[j] === 0x5d) j++; // a `]` first is a member
  for (; j < pattern.length; j++) {
    if (pattern[j] === 0x5d) return j;
    // [:class:], [=x=], [.x.] hold no `]` of their own.
    if (pattern[j] === 0x5b && [0x3a, 0x3d, 0x2e].includes(pattern[j + 1] ?? 0)) {
      const close = pattern.indexOf(0x5d, j + 2);
      if (close === -1) return -1;
      j = close;
    }
  }
  return -1;
}

/** The index of the `)` closing the group at `start`, or -1. */
function groupEnd(pattern: Uint8Array, start: number): number {
  let depth = 0;
  for (let j = start; j < pattern.length; j++) {
    const byte = pattern[j];
    if (byte === 0x5c) j++;
    else if (byte === 0x5b) {
      j = bracketEnd(pattern, j);
      if (j === -1) return -1;
    } else if (byte === 0x28) depth++;
    else if (byte === 0x29 && --depth === 0) return j;
  }
  return -1;
}

/**
 * The longest run of bytes every match of a POSIX extended regular expression contains, or null
 * when that cannot be told simply: an alternation outside groups, or no run of three. Groups and
 * bracket expressions end a run and are skipped; a byte followed by `?`, `*` or `{0` is optional.
 */
export function requiredLiteral(pattern: Uint8Array): Buffer | null {
  let best: number[] = [];
  let run: number[] = [];
  const end = () => {
    if (run.length > best.length) best = run;
    run = [];
  };
  const optionalNext = (i: number) =>
    pattern[i] === 0x3f || pattern[i] === 0x2a || (pattern[i] === 0x7b && pattern[i + 1] === 0x30);
  for (let i = 0; i < pattern.length; ) {
    const byte = pattern[i] as number;
    if (byte === 0x7c) return null; // | outside a group
    if (byte === 0x28 || byte === 0x5b) {
      const close = byte === 0x28 ? groupEnd(pattern, i) : bracketEnd(pattern, i);
      if (close === -1) return null;
      end();
      i = close + 1;
      if (optionalNext(i)) i++;
      continue;
    }
    let literal: number | null = byte;
    let next = i + 1;
    if (byte === 0x5c) {
      const escaped = pattern[i + 1];
      if (escaped === undefined) return null;
      // An escaped letter or digit may be a class or a back reference: not a literal.
      literal = /[A-Za-z0-9]/.test(String.fromCharCode(escaped)) ? null : escaped;
      next = i + 2;
    } else if ('.^$+*?{}'.includes(String.fromCharCode(byte))) {
      literal = null;
    }
    if (literal === null || optionalNext(next)) {
      end();
      if (byte === 0x7b) next = pattern.indexOf(0x7d, next) + 1 || pattern.length;
      i = next;
      continue;
    }
    run.push(literal);
    if (pattern[next] === 0x2b || pattern[next] === 0x7b) end(); // repeated: the run ends here
    i = next;
  }
  end();
  return best.length >= 3 ? Buffer.from(best) : null;
}

/**
 * How far after its offset a regex test can match: libmagic 5.48's mget() cuts the region a regex
 * runs over at `regex_max` bytes (softmagic.c, FILE_REGEX), FILE_REGEX_MAX, 8 KiB, which wasmagic's
 * wrapper leaves as it is (it sets no parameter). The condition looks a literal's length further.
 * It was 64 KiB: the two /usr/bin/env tests then cost 33 us each on every 64 KB head.
 */
const REGEX_WINDOW = 8 * 1024;

/**
 * The condition of a `regex` test without case folding: the run every match contains lies in
 * libmagic's window after `offset`.
 */
export function regexCondition(mgc: DataView, bytes: Uint8Array, at: number): FoundCondition {
  const flags = mgc.getUint32(at + FIELD.strFlags, true);
  if ((flags & (STRING_IGNORE_LOWERCASE | STRING_IGNORE_UPPERCASE)) !== 0) return null;
  const length = mgc.getUint8(at + FIELD.vallen);
  const literal = requiredLiteral(bytes.subarray(at + FIELD.value, at + FIELD.value + length));
  if (literal === null) return null;
  const offset = mgc.getInt32(at + FIELD.offset, true);
  const window = REGEX_WINDOW + literal.length;
  return {
    condition: (head) => head.subarray(offset, offset + window).includes(literal),
    keyed: null,
  };
}
