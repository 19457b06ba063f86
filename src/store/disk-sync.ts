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
