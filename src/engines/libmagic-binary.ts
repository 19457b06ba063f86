/**
 * wasmagic's WASM binary embeds its magic.mgc (10.8 MB) as data segments, which every instance
 * writes into its memory when it starts: resident for good, though libmagic reads it once into a
 * copy of its own (and the reduced tier loads another database altogether). `stripEmbeddedFile`
 * finds the file through emscripten's table of embedded files, returns its bytes, and a binary
 * whose segments inside it are empty: an instance of that binary never touches those pages, and
 * is given the file to load instead (libmagic.ts). 21 MB of RSS for libmagic's two instances.
 *
 * Only what emscripten emits is understood: active segments of memory 0 at an `i32.const`
 * offset. Anything else (another layout, a table not found) gives null, and the binary is used
 * as it is: a few MB more resident, the same answers.
 */

const WASM_HEADER = Buffer.from([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);
const SECTION_DATA = 11;
const I32_CONST = 0x41;
const END = 0x0b;

/**
 * The data section's segments, one column each (75,000 of them: objects would grow the heap by
 * tens of MB for a moment, and V8 keeps what it grew). Per segment: where it starts in the
 * section's content (its flags), where its length and its bytes start, how many bytes, and its
 * address in memory (NO_ADDRESS when it is not an active `i32.const` segment).
 */
interface Segments {
  count: number;
  start: Uint32Array;
  lengthAt: Uint32Array;
  bytesAt: Uint32Array;
  length: Uint32Array;
  address: Uint32Array;
}

const NO_ADDRESS = 0xffffffff;

class Reader {
  constructor(
    readonly bytes: Uint8Array,
    public at = 0,
  ) {}

  byte(): number {
    const value = this.bytes[this.at];
    if (value === undefined) throw new Error('the binary ends early');
    this.at += 1;
    return value;
  }

  u32(): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      const byte = this.byte();
      result += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return result;
    }
    throw new Error('a LEB128 number is too long');
  }

  i32(): number {
    let result = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = this.byte();
      result |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte & 0x80 && shift < 35);
    if (shift < 32 && byte & 0x40) result |= -1 << shift;
    return result;
  }
}

function leb128(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  do {
    let byte = rest & 0x7f;
    rest = Math.floor(rest / 128);
    if (rest > 0) byte |= 0x80;
    out.push(byte);
  } while (rest > 0);
  return out;
}

function readSegments(section: Uint8Array): Segments {
  const reader = new Reader(section);
  const count = reader.u32();
  const column = () => new Uint32Array(count);
  const segments = {
    count,
    start: column(),
    lengthAt: column(),
    bytesAt: column(),
    length: column(),
    address: column(),
  };
  for (let i = 0; i < count; i++) {
    segments.start[i] = reader.at;
    const flags = reader.u32();
    let address = NO_ADDRESS;
    if (flags === 0 || flags === 2) {
      if (flags === 2) reader.u32(); // memory index
      const opcode = reader.byte();
      if (opcode !== I32_CONST) throw new Error(`an offset expression starts with ${opcode}`);
      address = reader.i32() >>> 0;
      if (reader.byte() !== END) throw new Error('an offset expression is not a constant');
    } else if (flags !== 1) {
      throw new Error(`a data segment has flags ${flags}`);
    }
    segments.address[i] = address;
    segments.lengthAt[i] = reader.at;
    const length = reader.u32();
    segments.length[i] = length;
    segments.bytesAt[i] = reader.at;
    reader.at += length;
  }
  if (reader.at !== section.length)
    throw new Error('the data section has bytes after its segments');
  return segments;
}

/** The section holding data segments: where its content starts and ends. */
function dataSection(wasm: Uint8Array): { start: number; end: number; headerAt: number } {
  const magic = Buffer.from(wasm.buffer, wasm.byteOffset, Math.min(wasm.length, 8));
  if (!magic.equals(WASM_HEADER)) throw new Error('not a WebAssembly binary (version 1)');
  const reader = new Reader(wasm, 8);
  while (reader.at < wasm.length) {
    const headerAt = reader.at;
    const id = reader.byte();
    const size = reader.u32();
    if (reader.at + size > wasm.length) throw new Error('a section runs past the binary');
    if (id === SECTION_DATA) return { start: reader.at, end: reader.at + size, headerAt };
    reader.at += size;
  }
  throw new Error('the binary has no data section');
}

/** The index of the segment whose bytes hold the section's byte `at`; -1 when none does. */
function segmentHolding(segments: Segments, at: number): number {
  let low = 0;
  let high = segments.count - 1;
  while (low <= high) {
    const middle = (low + high) >>> 1;
    const from = segments.bytesAt[middle] as number;
    if (at < from) high = middle - 1;
    else if (at >= from + (segments.length[middle] as number)) low = middle + 1;
    else return middle;
  }
  return -1;
}

/** The memory address of the section's byte `at` (which an active segment holds), or null. */
function addressOf(segments: Segments, at: number): number | null {
  const i = segmentHolding(segments, at);
  if (i === -1 || segments.address[i] === NO_ADDRESS) return null;
  return (segments.address[i] as number) + at - (segments.bytesAt[i] as number);
}

/**
 * Where the embedded file `name` lies in memory: emscripten's table of embedded files holds, per
 * file, the addresses of its name and content and its length (three little-endian u32s, at a
 * 4-aligned address). Both the name and the entry are found in the segments' bytes, as written.
 */
function embeddedFile(
  section: Buffer,
  segments: Segments,
  name: string,
): { at: number; length: number } {
  const wanted = Buffer.from(`${name}\0`, 'latin1');
  for (
    let found = section.indexOf(wanted);
    found !== -1;
    found = section.indexOf(wanted, found + 1)
  ) {
    const nameAddress = addressOf(segments, found);
    if (nameAddress === null) continue;
    const key = Buffer.alloc(4);
    key.writeUInt32LE(nameAddress);
    for (let entry = section.indexOf(key); entry !== -1; entry = section.indexOf(key, entry + 1)) {
      const address = addressOf(segments, entry);
      if (address === null || address % 4 !== 0) continue;
      const words = Buffer.from(memoryBytes(section, segments, address, 12));
      const length = words.readUInt32LE(4);
      const at = words.readUInt32LE(8);
      if (length > 0) return { at, length };
    }
  }
  throw new Error(`no embedded file named ${name}`);
}

/**
 * Memory from `at` (`length` bytes) as the segments write it: zeros where none does (emscripten
 * leaves runs of zeros, trailing ones included, out of its segments).
 */
function memoryBytes(section: Buffer, segments: Segments, at: number, length: number): Uint8Array {
  const file = new Uint8Array(length);
  for (let i = 0; i < segments.count; i++) {
    const address = segments.address[i] as number;
    const size = segments.length[i] as number;
    if (address === NO_ADDRESS || address + size <= at || address >= at + length) continue;
    const from = Math.max(address, at);
    const to = Math.min(address + size, at + length);
    const bytes = segments.bytesAt[i] as number;
    file.set(section.subarray(bytes + from - address, bytes + to - address), from - at);
  }
  return file;
}

/**
 * `wasm` without the bytes of the embedded file `name` (segments wholly inside it are emptied:
 * their number, order and addresses are kept), and the file's bytes.
 */
export function stripEmbeddedFile(
  wasm: Uint8Array,
  name: string,
): { binary: Uint8Array; file: Uint8Array } {
  const { start, end, headerAt } = dataSection(wasm);
  const section = Buffer.from(wasm.buffer, wasm.byteOffset + start, end - start); // within wasm
  const segments = readSegments(section);
  const { at, length } = embeddedFile(section, segments, name);
  const file = memoryBytes(section, segments, at, length);
  const inside = (i: number) => {
    const address = segments.address[i] as number;
    const size = segments.length[i] as number;
    return address !== NO_ADDRESS && size > 0 && address >= at && address + size <= at + length;
  };
  // The section's new content: each segment as it was, or its head (flags and offset) then a
  // length of zero.
  const count = leb128(segments.count);
  let size = count.length;
  let dropped = 0;
  for (let i = 0; i < segments.count; i++) {
    if (inside(i)) {
      size += (segments.lengthAt[i] as number) - (segments.start[i] as number) + 1;
      dropped += segments.length[i] as number;
    } else {
      size +=
        (segments.bytesAt[i] as number) +
        (segments.length[i] as number) -
        (segments.start[i] as number);
    }
  }
  // Mostly zeros, which need no segment: ~1 MB of segments spread over its 10.8 MB.
  if (dropped === 0) throw new Error(`no segment lies inside ${name}`);
  const sectionHeader = [SECTION_DATA, ...leb128(size)];
  const tail = wasm.subarray(end);
  const binary = new Uint8Array(headerAt + sectionHeader.length + size + tail.length);
  binary.set(wasm.subarray(0, headerAt));
  let to = headerAt;
  binary.set(sectionHeader, to);
  to += sectionHeader.length;
  binary.set(count, to);
  to += count.length;
  for (let i = 0; i < segments.count; i++) {
    const from = segments.start[i] as number;
    if (inside(i)) {
      const head = section.subarray(from, segments.lengthAt[i] as number);
      binary.set(head, to);
      binary[to + head.length] = 0;
      to += head.length + 1;
    } else {
      const whole = section.subarray(
        from,
        (segments.bytesAt[i] as number) + (segments.length[i] as number),
      );
      binary.set(whole, to);
      to += whole.length;
    }
  }
  binary.set(tail, to);
  return { binary, file };
}
