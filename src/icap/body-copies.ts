import { randomBytes } from 'node:crypto';
import { type FileHandle, mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** Read back a piece at a time. */
const PIECE = 64 * 1024;

/**
 * Copies of ICAP bodies on disk, for clients that did not allow 204: a clean message is sent back
 * unmodified from its copy, never from memory. Each process keeps its copies in a folder named
 * after its pid; at start, the folders of processes no longer running (a crash) are removed.
 */
export class BodyCopies {
  private readonly own: string;

  constructor(private readonly dir: string) {
    this.own = join(dir, String(process.pid));
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of await readdir(this.dir)) {
      const pid = Number(name);
      if (Number.isInteger(pid) && pid !== process.pid && isRunning(pid)) continue;
      await rm(join(this.dir, name), { recursive: true, force: true });
    }
    await mkdir(this.own, { recursive: true });
  }

  async create(): Promise<BodyCopy> {
    const path = join(this.own, randomBytes(12).toString('hex'));
    return new BodyCopy(path, await open(path, 'w+', 0o600));
  }

  async close(): Promise<void> {
    await rm(this.own, { recursive: true, force: true });
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** One body's copy: written as it arrives, read back once, removed. */
export class BodyCopy {
  bytes = 0;
  private discarded = false;

  constructor(
    private readonly path: string,
    private readonly handle: FileHandle,
  ) {}

  async write(piece: Buffer): Promise<void> {
    await this.handle.write(piece, 0, piece.length, this.bytes);
    this.bytes += piece.length;
  }

  /** The copy from its start, a piece at a time. */
  async *pieces(): AsyncGenerator<Buffer> {
    let position = 0;
    while (position < this.bytes) {
      const piece = Buffer.allocUnsafe(Math.min(PIECE, this.bytes - position));
      const { bytesRead } = await this.handle.read(piece, 0, piece.length, position);
      if (bytesRead === 0) throw new Error('a body copy ended before its length');
      position += bytesRead;
      yield piece.subarray(0, bytesRead);
    }
  }

  async discard(): Promise<void> {
    if (this.discarded) return;
    this.discarded = true;
    await this.handle.close().catch(() => undefined);
    await rm(this.path, { force: true });
  }
}
