import { randomBytes } from 'node:crypto';
import * as zlib from 'node:zlib';

let crcTable: Uint32Array | undefined;

function tableCrc32(data: Uint8Array): number {
  if (crcTable === undefined) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (const byte of data) crc = (crcTable[(crc ^ byte) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

// zlib.crc32 exists from Node 20.15 on; earlier 20.x releases use the table.
export const crc32: (data: Uint8Array) => number =
  typeof zlib.crc32 === 'function' ? (data) => zlib.crc32(data) : tableCrc32;

export interface ZipEntry {
  name: string;
  data: Buffer;
  /** Encrypted with this password (traditional PKWARE encryption, ZipCrypto). */
  password?: string;
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

/** A minimal zip archive with every entry STORED (no compression), enough to test unpacking. */
export function zipStored(entries: ZipEntry[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const crc = crc32(entry.data);
    const stored =
      entry.password === undefined ? entry.data : zipCrypto(entry.password, entry.data, crc);
    // Bit 11: UTF-8 names; bit 0: encrypted.
    const flags = entry.password === undefined ? 0x0800 : 0x0801;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(flags, 6);
    local.writeUInt16LE(0, 8); // STORED
    local.writeUInt16LE(0, 10); // time 00:00
    local.writeUInt16LE(0x21, 12); // date 1980-01-01
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(stored.length, 18);
    local.writeUInt32LE(entry.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    parts.push(local, name, stored);

    const header = Buffer.alloc(46);
    header.writeUInt32LE(0x02014b50, 0);
    header.writeUInt16LE(20, 4); // version made by
    header.writeUInt16LE(20, 6);
    header.writeUInt16LE(flags, 8);
    header.writeUInt16LE(0, 10);
    header.writeUInt16LE(0, 12);
    header.writeUInt16LE(0x21, 14);
    header.writeUInt32LE(crc, 16);
    header.writeUInt32LE(stored.length, 20);
    header.writeUInt32LE(entry.data.length, 24);
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
