import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { syncDirectory } from './disk-sync.js';

export class SpoolTooLargeError extends Error {}

/** Error codes of a write that found no room: the file system's, a quota's, SQLite's. */
const NO_SPACE_CODES = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL']);

/** Whether a failure (or what caused it, a few levels down) is a full disk. */
export function isDiskFull(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && NO_SPACE_CODES.has(code)) return true;
    current = current.cause;
  }
  return false;
}

/** A spool file's name: the id of its job (32 hex digits), `.part` while it is being written. */
const SPOOL_NAME = /^([0-9a-f]{32})(?:\.part)?$/;

/**
 * Content accepted for later processing, kept in the data dir until its result is recorded. A
 * spool file is complete and on disk (fsync, rename, fsync of the directory) before anything
 * refers to it.
 */
export class Spool {
  private readonly dir: string;
  /** Set when a write in the data dir found no room; cleared once a probe write succeeds. */
  private full = false;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'spool');
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await syncDirectory(dirname(this.dir)); // a new spool directory's own entry
  }

  /**
   * Writes the content; returns its path and size. Throws SpoolTooLargeError past `maxBytes`.
   * `durable: false` skips the syncs, for content that is worthless after a crash (a download
   * scanned right after; the next attempt downloads it again).
   */
  async write(
    id: string,
    source: AsyncIterable<Buffer>,
    maxBytes: number,
    { durable = true }: { durable?: boolean } = {},
  ): Promise<{ path: string; size: number }> {
    const path = join(this.dir, id);
    const partial = `${path}.part`;
    const file = await open(partial, 'w');
    let size = 0;
    try {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > maxBytes)
          throw new SpoolTooLargeError(`the content exceeds the limit of ${maxBytes} bytes`);
        await file.write(chunk);
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
    if (!durable) return { path, size };
    try {
      // The rename is durable only once the directory is synced.
      await syncDirectory(this.dir);
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    return { path, size };
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

  read(path: string): Readable {
    return createReadStream(path, { highWaterMark: 1024 * 1024 });
  }

  async remove(path: string): Promise<void> {
    await rm(path, { force: true });
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
