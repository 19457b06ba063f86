import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { isDiskFull, SpoolTooLargeError } from '../domain/failures.js';
import { syncDirectory } from '../store/disk-sync.js';
import { noteStreamedBytes } from '../stream-memory.js';
import type { ContentSpool } from './content-spool.js';

/** A spool file's name: the id of its job (32 hex digits), `.part` while it is being written. */
const SPOOL_NAME = /^([0-9a-f]{32})(?:\.part)?$/;

/**
 * Content accepted for later processing, kept in a directory (the data dir's `spool`, or a
 * shared one: ASSAY_SPOOL_DIR) until its result is recorded. A spool file is complete and on disk
 * (fsync, rename, fsync of the directory) before anything refers to it. Keys are job ids: a file's
 * name, never a path.
 */
export class LocalSpool implements ContentSpool {
  /** Set when a write in the data dir found no room; cleared once a probe write succeeds. */
  private full = false;

  constructor(private readonly dir: string) {}

  get describe(): string {
    return this.dir;
  }

  /** The file of `key`; a key is a job id, so it never leaves the directory. */
  private pathOf(key: string): string {
    if (!SPOOL_NAME.test(key)) throw new Error(`not a spool key: ${key.slice(0, 40)}`);
    return join(this.dir, key);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await syncDirectory(dirname(this.dir)); // a new spool directory's own entry
  }

  /**
   * Writes the content; returns its key and size. Throws SpoolTooLargeError past `maxBytes`.
   * `durable: false` skips the syncs, for content that is worthless after a crash (a download
   * scanned right after; the next attempt downloads it again).
   */
  async write(
    id: string,
    source: AsyncIterable<Buffer>,
    maxBytes: number,
    { durable = true }: { durable?: boolean } = {},
  ): Promise<{ key: string; size: number }> {
    const path = this.pathOf(id);
    const partial = `${path}.part`;
    const file = await open(partial, 'w');
    let size = 0;
    try {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > maxBytes)
          throw new SpoolTooLargeError(`the content exceeds the limit of ${maxBytes} bytes`);
        await file.write(chunk);
        noteStreamedBytes(chunk.length);
      }
      if (durable) await file.datasync();
    } catch (error) {
      await file.close();
      await rm(partial, { force: true });
      if (isDiskFull(error)) this.full = true;
      throw error;
    }
    await file.close();
    await rename(partial, path);
    if (!durable) return { key: id, size };
    try {
      // The rename is durable only once the directory is synced.
      await syncDirectory(this.dir);
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    return { key: id, size };
  }

  /** A write in the data dir (the spool's or the store's) found the disk full. */
  noteDiskFull(): void {
    this.full = true;
  }

  /**
   * Whether the disk was found full and still is. Once a write found no room, the disk counts as
   * full until it has room for `uploadBytes` (the largest upload) or a tenth of its size, whichever
   * is less: a few free bytes left by a removed partial upload are not room for new work.
   */
  async diskFull(uploadBytes: number): Promise<boolean> {
    if (!this.full) return false;
    const stats = await statfs(this.dir);
    const free = stats.bavail * stats.bsize;
    if (free >= Math.min(uploadBytes, (stats.blocks * stats.bsize) / 10)) this.full = false;
    return this.full;
  }

  /** Whether the spool's disk has `bytes` free. */
  async hasRoom(bytes: number): Promise<boolean> {
    const stats = await statfs(this.dir);
    return stats.bavail * stats.bsize >= bytes;
  }

  read(key: string): Readable {
    return createReadStream(this.pathOf(key), { highWaterMark: 1024 * 1024 });
  }

  close(): void {}

  async remove(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /**
   * Removes spool files older than `graceMs` (by modification time) whose job id `isReferenced`
   * does not know: left by a submission that failed or a process that died between the spool
   * write and the job's commit, or after the result. Younger files may be uploads in progress.
   */
  async removeOrphans(
    graceMs: number,
    isReferenced: (id: string) => Promise<boolean>,
  ): Promise<{ files: number; bytes: number }> {
    const removed = { files: 0, bytes: 0 };
    const before = Date.now() - graceMs;
    for (const name of await readdir(this.dir)) {
      const id = SPOOL_NAME.exec(name)?.[1];
      if (id === undefined) continue;
      const path = join(this.dir, name);
      const info = await stat(path).catch(() => null);
      if (info === null || !info.isFile() || info.mtimeMs >= before) continue;
      if (await isReferenced(id)) continue;
      await rm(path, { force: true });
      removed.files += 1;
      removed.bytes += info.size;
    }
    return removed;
  }
}
