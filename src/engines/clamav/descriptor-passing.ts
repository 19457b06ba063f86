import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync, unlinkSync, writeSync, writevSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { packageRoot } from '../../paths.js';

/**
 * The native part (src/native/fd-passing.c, built by `npm ci` through binding.gyp): what clamd's
 * FILDES needs and Node's own modules lack. Each call returns a descriptor or 0, or a negative errno.
 */
export interface DescriptorPassing {
  memfd(): number;
  openTemporary(dir: string): number;
  sendFildes(socketFd: number, fileFd: number): number;
}

export type DescriptorPassingLoad =
  | { passing: DescriptorPassing; error: null }
  | { passing: null; error: string };

let loaded: DescriptorPassingLoad | undefined;

/** The addon, once; null with the reason where it is not built (clamd then gets INSTREAM). */
export function loadDescriptorPassing(): DescriptorPassingLoad {
  if (loaded !== undefined) return loaded;
  try {
    const require = createRequire(import.meta.url);
    const addon = join(packageRoot(), 'build', 'Release', 'fd_passing.node');
    const passing = require(addon) as DescriptorPassing;
    loaded = { passing, error: null };
  } catch (error) {
    loaded = { passing: null, error: error instanceof Error ? error.message : String(error) };
  }
  return loaded;
}

const EINVAL = 22;
const EISDIR = 21;
const EOPNOTSUPP = 95;
/** Read back for a fallback to INSTREAM, this much at a time. */
const PIECE = 256 * 1024;

function errnoError(code: number, what: string): Error {
  return Object.assign(new Error(`${what}: errno ${code}`), { errno: -code });
}

/**
 * What a process keeps in memory files past the items' hold: a memory file costs a copy into the
 * page cache, where a file on disk also costs the file system's block allocation (about a sixth of
 * Assay's CPU for a 10 MB item, `bench:icap`). Each item in memory reserves `perItem` bytes, and at
 * most `total` are reserved at once: the kernel memory this takes stays bounded whatever the
 * concurrency. It is not in the process's RSS (the files are never mapped), so it is counted here.
 */
export class MemoryFileBudget {
  private reserved = 0;

  constructor(
    readonly total: number,
    readonly perItem: number,
  ) {}

  tryReserve(): boolean {
    if (this.reserved + this.perItem > this.total) return false;
    this.reserved += this.perItem;
    return true;
  }

  release(): void {
    this.reserved -= this.perItem;
  }

  get inUse(): number {
    return this.reserved;
  }
}

/**
 * One item's content for clamd's FILDES: held up to `holdMax` bytes (and put in a memory file at
 * the end); past that written as it arrives to a memory file while the budget has room and the item
 * stays within its share, else to a file without a name in `dir` (an item that outgrows its memory
 * file moves to disk then, once). A large item is never held in the process's own memory. Writes
 * are synchronous, in the pieces the item arrives in.
 */
export class ScanFile {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private fd = -1;
  /** Bytes written to the file; the held chunks are not among them. */
  private fileBytes = 0;
  private closed = false;
  /** The file is a memory file holding a share of the budget. */
  private inMemory = false;

  constructor(
    private readonly passing: DescriptorPassing,
    private readonly dir: string,
    private readonly holdMax: number,
    private readonly budget: MemoryFileBudget,
  ) {}

  get length(): number {
    return this.fileBytes + this.heldBytes;
  }

  /**
   * Holds `chunk`, or writes it and whatever is held. Throws if the disk refuses them; all that
   * was taken, this chunk too, stays readable by pieces(). A held chunk must not change.
   */
  write(chunk: Buffer): void {
    if (this.fd === -1 && this.heldBytes + chunk.length <= this.holdMax) {
      if (chunk.length > 0) this.held.push(chunk);
      this.heldBytes += chunk.length;
      return;
    }
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.fd === -1) this.fd = this.openPastHold();
    else if (this.inMemory && this.length > this.budget.perItem) this.moveToDisk();
    this.flush();
  }

  /** A descriptor of the whole content, written; the caller must not close it (close() does). */
  descriptor(): number {
    if (this.closed) throw new Error('the scan file is closed');
    if (this.fd === -1) {
      const fd = this.passing.memfd();
      this.fd = fd >= 0 ? fd : this.openOnDisk();
    }
    this.flush();
    return this.fd;
  }

  /** The content from its start, a piece at a time (a fallback to INSTREAM). */
  *pieces(): Generator<Buffer> {
    for (let position = 0; position < this.fileBytes; ) {
      const piece = Buffer.allocUnsafe(Math.min(PIECE, this.fileBytes - position));
      const read = readSync(this.fd, piece, 0, piece.length, position);
      if (read === 0) throw new Error('the scan file ended before its length');
      position += read;
      yield piece.subarray(0, read);
    }
    yield* this.held;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.held = [];
    if (this.fd >= 0) closeSync(this.fd);
    this.leaveBudget();
  }

  /** A memory file while the budget has room and the item fits its share; else one on disk. */
  private openPastHold(): number {
    if (this.length <= this.budget.perItem && this.budget.tryReserve()) {
      const fd = this.passing.memfd();
      if (fd >= 0) {
        this.inMemory = true;
        return fd;
      }
      this.budget.release();
    }
    return this.openOnDisk();
  }

  /** The memory file's content to a file on disk, which replaces it (once per item). */
  private moveToDisk(): void {
    const disk = this.openOnDisk();
    try {
      const piece = Buffer.allocUnsafe(Math.min(PIECE * 4, this.fileBytes));
      for (let position = 0; position < this.fileBytes; ) {
        const read = readSync(
          this.fd,
          piece,
          0,
          Math.min(piece.length, this.fileBytes - position),
          position,
        );
        if (read === 0) throw new Error('the memory file ended before its length');
        let written = 0;
        while (written < read) {
          written += writeSync(disk, piece, written, read - written, position + written);
        }
        position += read;
      }
    } catch (error) {
      closeSync(disk);
      throw error;
    }
    closeSync(this.fd);
    this.fd = disk;
    this.leaveBudget();
  }

  private leaveBudget(): void {
    if (!this.inMemory) return;
    this.inMemory = false;
    this.budget.release();
  }

  /** Writes the held chunks behind what the file has; they stay held until all are written. */
  private flush(): void {
    let position = this.fileBytes;
    let buffers = this.held;
    while (buffers.length > 0) {
      let written = writevSync(this.fd, buffers, position);
      position += written;
      const rest: Buffer[] = [];
      for (const buffer of buffers) {
        if (written >= buffer.length) written -= buffer.length;
        else {
          rest.push(buffer.subarray(written));
          written = 0;
        }
      }
      buffers = rest;
    }
    this.fileBytes = position;
    this.held = [];
    this.heldBytes = 0;
  }

  /** An unnamed file (O_TMPFILE); where the file system has none, a named one removed at once. */
  private openOnDisk(): number {
    const fd = this.passing.openTemporary(this.dir);
    if (fd >= 0) return fd;
    if (fd !== -EOPNOTSUPP && fd !== -EISDIR && fd !== -EINVAL) {
      throw errnoError(-fd, `could not make a file for clamd in ${this.dir}`);
    }
    const path = join(this.dir, `.scan-${randomBytes(9).toString('hex')}`);
    const named = openSync(path, 'wx+', 0o600);
    unlinkSync(path);
    return named;
  }
}
