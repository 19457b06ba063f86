import { open } from 'node:fs/promises';

/**
 * Makes a directory's entries durable: a file created or renamed into it survives power loss only
 * once the directory itself is synced, not just the file's bytes.
 */
export async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fdatasync of a file by path, on libuv's threads; a file that is not there has nothing to sync. */
export async function syncFileData(path: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/**
 * fsyncs of one directory shared by the callers that ask at once: a sync started after a caller
 * asked covers every entry that caller made, so callers arriving while one runs share the next.
 * Many spool files renamed together cost two directory syncs, not one each.
 */
export class SharedDirectorySync {
  private running: Promise<void> | null = null;
  private next: Promise<void> | null = null;

  constructor(private readonly path: string) {}

  sync(): Promise<void> {
    if (this.next !== null) return this.next;
    if (this.running === null) return this.start();
    // The sync under way may have begun before this caller's entry: it waits for the next one.
    this.next = this.running
      .catch(() => {})
      .then(() => {
        this.next = null;
        return this.start();
      });
    return this.next;
  }

  private start(): Promise<void> {
    const run = syncDirectory(this.path).finally(() => {
      if (this.running === run) this.running = null;
    });
    this.running = run;
    return run;
  }
}
