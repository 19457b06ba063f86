// Worker thread of ContentTypeDetector: runs libmagic off the event loop.
import { parentPort } from 'node:worker_threads';
import { WASMagic } from 'wasmagic';

interface Request {
  id: number;
  head: Uint8Array;
}

const magic = await WASMagic.create();
const port = parentPort;
if (port === null) throw new Error('content-type-worker must run as a worker thread');

port.on('message', ({ id, head }: Request) => {
  try {
    port.postMessage({
      id,
      type: magic.detect(Buffer.from(head.buffer, head.byteOffset, head.length)),
    });
  } catch (error) {
    port.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
port.postMessage({ ready: true });
