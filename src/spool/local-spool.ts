import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, mkdir, open, readdir, rename, rm, stat, statfs } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { isDiskFull, SpoolTooLargeError, SpoolUnavailableError } from '../domain/failures.js';
import { SharedDirectorySync, syncDirectory } from '../store/disk-sync.js';
import { noteStreamedBytes } from '../stream-memory.js';
import type { ContentSpool } from './content-spool.js';
import { SpoolHealth } from './spool-health.js';

/** Bytes of a spool file's first read, and of each read once one came back full. */
const FIRST_READ = 64 * 1024;
const READ_CHUNK = 1024 * 1024;

/** A spool file's name: the id of its job (32 hex digits), `.part` while it is being written. */
const SPOOL_NAME = /^([0-9a-f]{32})(?:\.part)?$/;

/**
 * Content accepted for later processing, kept in a directory (the data dir's `spool`, or a
 * shared one: ASSAY_SPOOL_DIR) until its result is recorded. A spool file is complete and on disk
 * (fsync, rename, fsync of the directory) before anything refers to it. Keys are job ids: a file's
 * name, never a path.
 *
 * A failed file system call is an outage (SpoolUnavailableError, its cause naming the path for the
 * log), except a full disk (kept as it is: 507) and, on read, a file missing or unreadable in a
 * directory that answers a check made after the failure: that is the item's (SpooledContentError).
 */
export class LocalSpool implements ContentSpool {
  /** Set when a write in the data dir found no room; cleared once a probe write succeeds. */
  private full = false;
  private readonly health: SpoolHealth;
  /** Renames made together share the directory's sync. */
  private readonly directorySync: SharedDirectorySync;

  /** @param healthReuseMs how long a check's outcome answers later ones (SpoolHealth's default). */
  constructor(
    private readonly dir: string,
    healthReuseMs?: number,
  ) {
    this.directorySync = new SharedDirectorySync(dir);
    this.health = new SpoolHealth(
      { quick: () => this.answers(), thorough: () => this.probeWrite() },
      { reuseMs: healthReuseMs },
    );
  }

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
    const file = await this.call('writing', () => open(partial, 'w'));
    let size = 0;
    try {
      for await (const chunk of source) {
        size += chunk.length;
        if (size > maxBytes)
          throw new SpoolTooLargeError(`the content exceeds the limit of ${maxBytes} bytes`);
        await this.call('writing', () => file.write(chunk));
        noteStreamedBytes(chunk.length);
      }
      if (durable) await this.call('writing', () => file.datasync());
      await this.call('writing', () => file.close());
      await this.call('writing', () => rename(partial, path));
    } catch (error) {
      // The spool may be out: what cannot be removed now is an orphan for the sweep.
      await file.close().catch(() => {});
      await rm(partial, { force: true }).catch(() => {});
      throw error;
    }
    if (durable) {
      try {
        // The rename is durable only once the directory is synced.
        await this.call('writing', () => this.directorySync.sync());
      } catch (error) {
        await rm(path, { force: true }).catch(() => {});
        throw error;
      }
    }
    this.health.noteSuccess();
    return { key: id, size };
  }

  /**
   * A file system call of the spool's: a full disk stays itself (507, and readiness says so until
   * there is room); any other failure is an outage, remembered for readiness.
   */
  private async call<T>(doing: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (isDiskFull(error)) {
        this.full = true;
        throw error;
      }
      this.health.noteFailure(error);
      throw new SpoolUnavailableError(doing, error);
    }
  }

  /** The directory is there, and this process may read and write in it (EROFS on a read-only mount). */
  private async answers(): Promise<void> {
    const info = await stat(this.dir);
    if (!info.isDirectory()) {
      throw Object.assign(new Error(`${this.dir} is not a directory`), { code: 'ENOTDIR' });
    }
    await access(this.dir, constants.R_OK | constants.W_OK | constants.X_OK);
  }

  /** An empty file created and removed, as a write does; a full disk is answering (disk full). */
  private async probeWrite(): Promise<void> {
    await this.answers();
    const probe = join(this.dir, `.probe-${process.pid}-${randomBytes(4).toString('hex')}`);
    try {
      await (await open(probe, 'wx')).close();
    } catch (error) {
      if (isDiskFull(error)) return;
      throw error;
    }
    await rm(probe, { force: true });
  }

  check(): Promise<void> {
    return this.health.check();
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
    const path = this.pathOf(key);
    const chunks = async function* (spool: LocalSpool): AsyncGenerator<Buffer> {
      let file: Awaited<ReturnType<typeof open>>;
      try {
        file = await open(path, 'r');
      } catch (error) {
        throw await spool.readFailure(error, performance.now(), path);
      }
      try {
        // Small first: most content is small, and a 1 MiB buffer for each 4 KB item made the
        // garbage collector's threads cost more than the item's scan. Full reads grow it.
        let size = FIRST_READ;
        for (;;) {
          const buffer = Buffer.allocUnsafe(size);
          let bytesRead: number;
          try {
            ({ bytesRead } = await file.read(buffer, 0, size, null));
          } catch (error) {
            throw await spool.readFailure(error, performance.now(), path);
          }
          if (bytesRead === 0) return;
          yield bytesRead === size ? buffer : buffer.subarray(0, bytesRead);
          if (bytesRead === size) size = READ_CHUNK;
        }
      } finally {
        // Also when the reader stops early (the generator is returned).
        await file.close().catch(() => {});
      }
    };
    // One chunk waits here at most: the next read starts as this one is taken.
    return Readable.from(chunks(this), { objectMode: false, highWaterMark: 1 });
  }

  /**
   * A read failed: the item's (its file is missing, or only it cannot be read) if the directory
   * answers a check made after the failure, else an outage. A missing directory is an outage: a
   * shared spool that is not mounted, never every item's content gone; so is a file missing at
   * the failure and there at the check (the directory came back in between).
   */
  private readFailure(error: unknown, failedAt: number, path: string): Promise<Error> {
    const missing = (error as { code?: unknown }).code === 'ENOENT';
    return this.health.readFailure(error, failedAt, missing, () =>
      stat(path).then(
        (info) => info.isFile(),
        () => false,
      ),
    );
  }

  close(): void {}

  async remove(key: string): Promise<void> {
    const path = this.pathOf(key);
    await this.call('removing', () => rm(path, { force: true }));
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
