import { createReadStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { syncDirectory } from './disk-sync.js';

export class SpoolTooLargeError extends Error {}

/** A spool file's name: the id of its job (32 hex digits), `.part` while it is being written. */
const SPOOL_NAME = /^([0-9a-f]{32})(?:\.part)?$/;

/**
 * Content accepted for later processing, kept in the data dir until its result is recorded. A
 * spool file is complete and on disk (fsync, rename, fsync of the directory) before anything
 * refers to it.
 */
export class Spool {
  private readonly dir: string;

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
