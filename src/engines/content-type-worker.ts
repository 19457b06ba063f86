// Worker thread of ContentTypeDetector: runs libmagic off the event loop.
import { parentPort, workerData } from 'node:worker_threads';
import { collectAllGarbage } from '../stream-memory.js';
import type { WorkerSettings } from './content-type.js';
import { Libmagic } from './libmagic.js';

interface Request {
  id: number;
  head: Uint8Array<ArrayBuffer>;
}

const settings = workerData as WorkerSettings;
// Test faults (never set by the service): a failed start, a hang, an exit or an error on a marker.
if (settings.failStart) throw new Error('test fault: the worker fails to start');
const fault = (head: Buffer, marker: string | undefined) =>
  marker !== undefined && head.includes(marker);

const magic = await Libmagic.create({ tiered: settings.tiered });
// The start's buffers (wasmagic's binary as read, the database, the stripped binary: ~24 MB) are
// garbage now, and this thread would never allocate enough to collect them: resident for good.
collectAllGarbage();
const port = parentPort;
if (port === null) throw new Error('content-type-worker must run as a worker thread');

port.on('message', ({ id, head }: Request) => {
  const bytes = Buffer.from(head.buffer, head.byteOffset, head.length);
  try {
    if (fault(bytes, settings.hangOn)) for (;;);
    if (fault(bytes, settings.exitOn)) process.exit(1);
    if (fault(bytes, settings.failOn)) throw new Error('test fault: libmagic fails');
    const type = magic.detect(bytes);
    // The head goes back to the main thread, which reuses its buffer (content-type.ts).
    port.postMessage({ id, type, head }, [head.buffer]);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    port.postMessage({ id, error: message, head }, [head.buffer]);
  }
});
port.postMessage({ ready: true });
