import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * Content streams through the service in 64 KB buffers (network reads, file reads) that are dead
 * once hashed and passed on. V8 frees a dead buffer only at a collection, and a large upload
 * allocates too few JavaScript objects to start one: its buffers piled up until V8's external
 * memory trigger (64 MB past the last collection), on top of whatever the heap held then. A
 * young-generation collection every this many streamed bytes frees them; it costs about 0.5-2 ms,
 * where hashing these bytes alone costs about 8 ms (docs/ARCHITECTURE.md, Memory).
 */
export const COLLECT_EVERY_BYTES = 8 * 1024 * 1024;

let sinceCollection = 0;
/** null: this runtime gives no collector (the counting still runs, for nothing). */
let gcFunction: ((options?: { type: 'minor' | 'major' }) => void) | null | undefined;

/** Counts content bytes this process streamed (any upload, download or spool read). */
export function noteStreamedBytes(bytes: number): void {
  sinceCollection += bytes;
  if (sinceCollection < COLLECT_EVERY_BYTES) return;
  sinceCollection = 0;
  collector()?.({ type: 'minor' });
}

/**
 * A full collection of this thread's heap, once its start has left garbage that nothing would
 * collect: an idle worker thread allocates too little to start one (libmagic's start leaves
 * ~24 MB of buffers: content-type-worker.ts).
 */
export function collectAllGarbage(): void {
  collector()?.({ type: 'major' });
}

function collector(): ((options?: { type: 'minor' | 'major' }) => void) | null {
  if (gcFunction === undefined) {
    try {
      // The flag puts a `gc` function in contexts created after it: this one's, kept private.
      // The service's own global never gets one, so no dependency can start collections.
      setFlagsFromString('--expose-gc');
      const gc = runInNewContext('gc') as
        | ((options?: { type: 'minor' | 'major' }) => void)
        | undefined;
      gcFunction = typeof gc === 'function' ? gc : null;
    } catch {
      gcFunction = null;
    }
  }
  return gcFunction;
}
