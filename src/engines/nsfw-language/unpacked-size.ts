// How much a zip package (DOCX) unpacks to, counted before an extractor unpacks it: mammoth's
// unzip holds each part whole, outside the worker's heap limit, so a part that unpacks to 1.5 GiB
// from 1.5 MB took the process's RSS to 4.8 GB.
import { Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';

export class UnpackedTooLargeError extends Error {
  constructor(limit: number) {
    super(`its parts unpack to more than the ${limit} bytes examined`);
  }
}

const END = 0x06054b50;
const END64 = 0x06064b50;
const END64_LOCATOR = 0x07064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const MAX32 = 0xffffffff;

/** Where the central directory is and how many entries it lists; null if there is none. */
function directoryOf(zip: Buffer): { offset: number; entries: number; shift: number } | null {
  const last = zip.length - 22;
  for (let at = last; at >= Math.max(0, last - 0xffff); at--) {
    if (zip.readUInt32LE(at) !== END) continue;
    let entries = zip.readUInt16LE(at + 10);
    let size = zip.readUInt32LE(at + 12);
    let offset = zip.readUInt32LE(at + 16);
    let end = at;
    const locator = at - 20;
    if (locator >= 0 && zip.readUInt32LE(locator) === END64_LOCATOR) {
      const record = Number(zip.readBigUInt64LE(locator + 8));
      if (record + 56 > zip.length || zip.readUInt32LE(record) !== END64) return null;
      entries = Number(zip.readBigUInt64LE(record + 32));
      size = Number(zip.readBigUInt64LE(record + 40));
      offset = Number(zip.readBigUInt64LE(record + 48));
      end = record;
    }
    // Bytes before the archive (a polyglot): its offsets count from where it starts, as JSZip
    // reads them.
    return { offset, entries, shift: Math.max(0, end - (offset + size)) };
  }
  return null;
}

/** The zip64 extra field's values for the 32-bit fields that hold the placeholder. */
function zip64Sizes(extra: Buffer, fields: number[]): number[] {
  for (let at = 0; at + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(at);
    const length = extra.readUInt16LE(at + 2);
    if (id === 0x0001) {
      let next = at + 4;
      return fields.map((value) => {
        if (value !== MAX32 || next + 8 > at + 4 + length) return value;
        const wide = Number(extra.readBigUInt64LE(next));
        next += 8;
        return wide;
      });
    }
    at += 4 + length;
  }
  return fields;
}

async function inflatedBytes(packed: Buffer, budget: number): Promise<number> {
  let size = 0;
  const inflate = createInflateRaw();
  Readable.from([packed]).pipe(inflate);
  for await (const chunk of inflate as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > budget) {
      inflate.destroy();
      break;
    }
  }
  return size;
}

/**
 * Unpacks every entry of `zip` (STORED or DEFLATE: what JSZip reads), counting, without holding
 * what it unpacks, and throws UnpackedTooLargeError as soon as the total passes `limit`. The sizes
 * in the headers are not trusted: a bomb can declare anything. What cannot be read as a zip here is
 * left to the extractor, which fails on it too.
 */
export async function checkUnpackedSize(zip: Buffer, limit: number): Promise<void> {
  const directory = directoryOf(zip);
  if (directory === null) return;
  let total = 0;
  let at = directory.offset + directory.shift;
  for (let entry = 0; entry < directory.entries; entry++) {
    if (at + 46 > zip.length || zip.readUInt32LE(at) !== CENTRAL) return;
    const method = zip.readUInt16LE(at + 10);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const extra = zip.subarray(at + 46 + nameLength, at + 46 + nameLength + extraLength);
    const [, packedSize = 0, localOffset = 0] = zip64Sizes(extra, [
      zip.readUInt32LE(at + 24),
      zip.readUInt32LE(at + 20),
      zip.readUInt32LE(at + 42),
    ]);
    at += 46 + nameLength + extraLength + zip.readUInt16LE(at + 32);
    const local = localOffset + directory.shift;
    if (local + 30 > zip.length || zip.readUInt32LE(local) !== LOCAL) continue;
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const packed = zip.subarray(start, start + packedSize);
    if (method === 0) total += packed.length;
    else if (method === 8) total += await inflatedBytes(packed, limit - total);
    if (total > limit) throw new UnpackedTooLargeError(limit);
  }
}
