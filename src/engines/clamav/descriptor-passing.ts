import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readSync, unlinkSync, writevSync } from 'node:fs';
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
 * One item's content for clamd's FILDES: held in memory up to `holdMax` bytes (and put in a memory
 * file at the end), past that written as it arrives to a file without a name in `dir`, so a large
 * item is never held whole in memory. Writes are synchronous: to the page cache, in the pieces
 * the item arrives in.
 */
export class ScanFile {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private fd = -1;
  /** Bytes written to the file; the held chunks are not among them. */
  private fileBytes = 0;
  private closed = false;

  constructor(
    private readonly passing: DescriptorPassing,
    private readonly dir: string,
    private readonly holdMax: number,
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
    if (this.fd === -1) this.fd = this.openOnDisk();
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
