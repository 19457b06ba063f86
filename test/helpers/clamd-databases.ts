/**
 * A `daily` database as freshclam would leave it, for tests of signature updates: clamd reports
 * its version in VERSION (as it does the official daily.cvd's) and loads its body signatures.
 * It is a `.cud` (an unsigned CVD: a 512-byte header, then a gzipped tar whose `daily.info`
 * lists each file's size and SHA-256), since only Talos can sign a `.cvd`; its signatures'
 * names come back with `.UNOFFICIAL`.
 */
import { createHash } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { tarEntry } from './tar.js';

/**
 * Writes `<dir>/daily.cud` of `version`, with one body signature per entry of `signatures`
 * (name: the bytes it matches anywhere), replacing any earlier one at once (a rename).
 */
export function writeDailyDatabase(
  dir: string,
  version: number,
  signatures: Record<string, Buffer>,
): void {
  const ndb = Buffer.from(
    Object.entries(signatures)
      .map(([name, bytes]) => `${name}:0:*:${bytes.toString('hex')}\n`)
      .join(''),
  );
  // Fields: time (no colons), version, signatures, functionality level, MD5, signature, builder,
  // creation time in seconds; the last three are not checked for an unsigned database.
  const seconds = Math.floor(Date.now() / 1000);
  const header = `ClamAV-VDB:01 Jan 2026 00-00 +0000:${version}:${Object.keys(signatures).length}:60:x:x:assay-test:${seconds}`;
  const info = Buffer.from(
    `${header}\ndaily.ndb:${ndb.length}:${createHash('sha256').update(ndb).digest('hex')}\n`,
  );
  const tar = Buffer.concat([
    tarEntry('daily.info', info),
    tarEntry('daily.ndb', ndb),
    Buffer.alloc(1024),
  ]);
  const head = Buffer.alloc(512, ' ');
  head.write(header);
  const temporary = join(dir, '.daily.cud.tmp');
  writeFileSync(temporary, Buffer.concat([head, gzipSync(tar)]));
  renameSync(temporary, join(dir, 'daily.cud'));
}
