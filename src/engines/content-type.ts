import { Worker } from 'node:worker_threads';
import { classifyText, isUtf8Text } from './text-type.js';

/** libmagic sees at most this much of the content; the rest never changes its answer in practice. */
export const SNIFF_BYTES = 1024 * 1024;

// The vendor's clients expect the vendor's names where libmagic has newer ones.
const VENDOR_NAMES: Record<string, string> = {
  'application/vnd.microsoft.portable-executable': 'application/x-msdownload',
  'application/x-dosexec': 'application/x-msdownload',
};

type Reply = { ready: true } | { id: number; type: string } | { id: number; error: string };

const UNKNOWN = 'application/octet-stream';

/**
 * Media type detection: fast rules for UTF-8 text, libmagic (compiled to WASM) for binary content.
 * libmagic costs 0.3-0.5 ms of CPU per file, so it runs in a worker thread, in parallel with
 * clamd's scan, and the event loop stays free for other requests.
 */
export class ContentTypeDetector {
  private readonly pending = new Map<number, (type: string) => void>();
  private nextId = 0;
  private worker: Worker | null = null;
  private closed = false;

  private constructor(private readonly log: (message: string) => void) {}

  static async create(log: (message: string) => void = () => {}): Promise<ContentTypeDetector> {
    const detector = new ContentTypeDetector(log);
    await detector.startWorker();
    return detector;
  }

  /** `complete` says the head is the whole content, so a JSON document can be parsed whole. */
  async detect(head: Buffer, complete: boolean): Promise<string> {
    if (head.length > 0 && isUtf8Text(head)) return classifyText(head, complete);
    return this.detectWithLibmagic(head);
  }

  /** libmagic with its whole magic file, whatever the content (the tests' reference). */
  detectWithLibmagic(head: Buffer): Promise<string> {
    const worker = this.worker;
    // The media type is a description, not a verdict: without libmagic it is honestly unknown.
    if (worker === null) return Promise.resolve(UNKNOWN);
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      worker.postMessage({ id, head });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.worker?.terminate();
    this.worker = null;
  }

  private startWorker(): Promise<void> {
    const worker = spawnWorker();
    return new Promise((resolve, reject) => {
      let started = false;
      worker.on('message', (reply: Reply) => {
        if ('ready' in reply) {
          started = true;
          this.worker = worker;
          resolve();
          return;
        }
        const settle = this.pending.get(reply.id);
        this.pending.delete(reply.id);
        if ('error' in reply) this.log(`libmagic failed: ${reply.error}`);
        const type = 'type' in reply ? reply.type.split(';')[0]?.trim() || UNKNOWN : UNKNOWN;
        settle?.(VENDOR_NAMES[type] ?? type);
      });
      worker.on('error', (error) => {
        this.log(`content type worker failed: ${error.message}`);
        if (!started) reject(error);
      });
      worker.on('exit', () => {
        if (this.worker === worker) this.worker = null;
        for (const settle of this.pending.values()) settle(UNKNOWN);
        this.pending.clear();
        // Only a worker that once ran is restarted, after a pause: one that cannot start never will.
        if (started && !this.closed) {
          this.log('content type worker exited; restarting it in 1 s');
          setTimeout(() => {
            if (!this.closed) this.startWorker().catch(() => undefined);
          }, 1000).unref();
        }
      });
    });
  }
}

/** The worker runs the compiled .js file; under tsx (tests, development) it registers tsx first. */
function spawnWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    return new Worker(new URL('./content-type-worker.js', import.meta.url));
  }
  const entry = new URL('./content-type-worker.ts', import.meta.url).href;
  const bootstrap = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true });
}
