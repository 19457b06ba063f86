/** Tar archives (ustar) built in memory, for tests: clamd's databases, libmagic's formats. */

/** One file's 512-byte ustar header and its data, padded to a whole block. */
export function tarEntry(name: string, data: Buffer): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0);
  header.write('0000644\0', 100);
  header.write('0000000\0', 108);
  header.write('0000000\0', 116);
  header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124);
  header.write(
    `${Math.floor(Date.now() / 1000)
      .toString(8)
      .padStart(11, '0')}\0`,
    136,
  );
  header.write('        ', 148); // the checksum counts its own field as blanks
  header.write('0', 156);
  header.write('ustar\0', 257);
  header.write('00', 263);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return Buffer.concat([header, data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
}

/** A tar archive of `entries` (name, content), with the two empty blocks that end it. */
export function tarArchive(entries: Array<[string, Buffer]>): Buffer {
  return Buffer.concat([
    ...entries.map(([name, data]) => tarEntry(name, data)),
    Buffer.alloc(1024),
  ]);
}
