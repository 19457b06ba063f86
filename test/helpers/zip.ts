import { randomBytes } from 'node:crypto';
import * as zlib from 'node:zlib';

let crcTable: Uint32Array | undefined;

function tableCrc32(data: Uint8Array, initial = 0): number {
  if (crcTable === undefined) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = (initial ^ 0xffffffff) >>> 0;
  for (const byte of data) crc = (crcTable[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// zlib.crc32 exists from Node 20.15 on; earlier 20.x releases use the table. `initial` continues
// the CRC of what came before, for content built piece by piece.
export const crc32: (data: Uint8Array, initial?: number) => number =
  typeof zlib.crc32 === 'function' ? (data, initial = 0) => zlib.crc32(data, initial) : tableCrc32;

export interface ZipEntry {
  name: string;
  data: Buffer;
  /** Encrypted with this password (traditional PKWARE encryption, ZipCrypto). */
  password?: string;
  /** Compressed (DEFLATE) instead of STORED: its bytes then appear only once it is unpacked. */
  deflate?: boolean;
}

/** Raw DEFLATE data with what a container records of the content it unpacks to. */
export interface Deflated {
  data: Buffer;
  crc: number;
  size: number;
}

/** An entry compressed beforehand: content too large to hold once unpacked (a bomb). */
export interface DeflatedEntry {
  name: string;
  deflated: Deflated;
}

/**
 * DEFLATE of `head`, then `block` `times` over, then `tail`, without ever holding the whole: each
 * piece is compressed once with a full flush (byte-aligned, no reference to what came before), so
 * copies of a piece can follow one another; the last piece ends the stream.
 */
export function deflateRepeated(
  block: Buffer,
  times: number,
  head?: Buffer,
  tail?: Buffer,
): Deflated {
  const flushed = (data: Buffer) =>
    zlib.deflateRawSync(data, { finishFlush: zlib.constants.Z_FULL_FLUSH });
  const packedBlock = flushed(block);
  let crc = head === undefined ? 0 : crc32(head);
  for (let i = 0; i < times; i++) crc = crc32(block, crc);
  if (tail !== undefined) crc = crc32(tail, crc);
  return {
    data: Buffer.concat([
      ...(head === undefined ? [] : [flushed(head)]),
      ...Array.from({ length: times }, () => packedBlock),
      zlib.deflateRawSync(tail ?? Buffer.alloc(0)),
    ]),
    crc: crc >>> 0,
    size: (head?.length ?? 0) + block.length * times + (tail?.length ?? 0),
  };
}

/** The CRC-32 of one more byte, as ZipCrypto's key schedule steps it. */
function crcStep(crc: number, byte: number): number {
  if (crcTable === undefined) tableCrc32(new Uint8Array(0));
  return ((crcTable?.[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8)) >>> 0;
}

/** ZipCrypto (APPNOTE 6.1): a 12-byte header whose last byte checks the password, then the data. */
function zipCrypto(password: string, data: Buffer, crc: number): Buffer {
  let k0 = 0x12345678;
  let k1 = 0x23456789;
  let k2 = 0x34567890;
  const update = (byte: number) => {
    k0 = crcStep(k0, byte);
    k1 = (Math.imul((k1 + (k0 & 0xff)) >>> 0, 134775813) + 1) >>> 0;
    k2 = crcStep(k2, k1 >>> 24);
  };
  for (const byte of Buffer.from(password, 'utf8')) update(byte);
  const plain = Buffer.concat([randomBytes(11), Buffer.from([crc >>> 24]), data]);
  const sealed = Buffer.alloc(plain.length);
  for (let i = 0; i < plain.length; i++) {
    const temp = (k2 | 2) & 0xffff;
    const byte = plain[i] ?? 0;
    sealed[i] = byte ^ ((Math.imul(temp, temp ^ 1) >>> 8) & 0xff);
    update(byte);
  }
  return sealed;
}

/** The entry as written: its content as stored, how, and what it unpacks to. */
function packed(entry: ZipEntry | DeflatedEntry): {
  stored: Buffer;
  method: number;
  crc: number;
  size: number;
  encrypted: boolean;
} {
  if ('deflated' in entry) {
    const { data, crc, size } = entry.deflated;
    return { stored: data, method: 8, crc, size, encrypted: false };
  }
  const crc = crc32(entry.data);
  const content = entry.deflate === true ? zlib.deflateRawSync(entry.data) : entry.data;
  const stored = entry.password === undefined ? content : zipCrypto(entry.password, content, crc);
  const method = entry.deflate === true ? 8 : 0;
  return { stored, method, crc, size: entry.data.length, encrypted: entry.password !== undefined };
}

/** A minimal zip archive with every entry STORED (no compression), enough to test unpacking. */
export function zipStored(entries: ZipEntry[]): Buffer {
  return zipArchive(entries);
}

/**
 * A minimal zip archive: entries STORED unless they say `deflate` or come compressed beforehand
 * (sizes and offsets in 32 bits: up to 4 GiB each). After `prefix`, if given, with offsets that
 * count it (as `zip -A` leaves them): a file that is another format read from its start and a
 * zip read from its end.
 */
export function zipArchive(entries: Array<ZipEntry | DeflatedEntry>, prefix?: Buffer): Buffer {
  const parts: Buffer[] = prefix === undefined ? [] : [prefix];
  const central: Buffer[] = [];
  let offset = prefix?.length ?? 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const { stored, method, crc, size, encrypted } = packed(entry);
    // Bit 11: UTF-8 names; bit 0: encrypted.
    const flags = encrypted ? 0x0801 : 0x0800;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(flags, 6);
    local.writeUInt16LE(method, 8);
    local.writeUInt16LE(0, 10); // time 00:00
    local.writeUInt16LE(0x21, 12); // date 1980-01-01
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(stored.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    parts.push(local, name, stored);

    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE(20, 4); // version made by
    header.writeUInt16LE(20, 6);
    header.writeUInt16LE(flags, 8);
    header.writeUInt16LE(method, 10);
    header.writeUInt16LE(0, 12);
    header.writeUInt16LE(0x21, 14);
    header.writeUInt32LE(crc, 16);
    header.writeUInt32LE(stored.length, 20);
    header.writeUInt32LE(size, 24);
    header.writeUInt16LE(name.length, 28);
    header.writeUInt32LE(offset, 42); // the rest (extra, comment, disk, attributes) stays 0
    central.push(header, name);
    offset += local.length + name.length + stored.length;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, directory, end]);
}
