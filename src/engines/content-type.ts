import { Worker } from 'node:worker_threads';
import { collectAllGarbage } from '../stream-memory.js';
import { ReducedTier } from './libmagic.js';
import { classifyText, isUtf8Text } from './text-type.js';

/** libmagic sees at most this much of the content; the rest never changes its answer in practice. */
export const SNIFF_BYTES = 1024 * 1024;

// The vendor's clients expect the vendor's names where libmagic has newer ones.
const VENDOR_NAMES: Record<string, string> = {
  'application/vnd.microsoft.portable-executable': 'application/x-msdownload',
  'application/x-dosexec': 'application/x-msdownload',
};

type Reply =
  | { ready: true }
  | { id: number; type: string; head: Uint8Array }
  | { id: number; error: string; head: Uint8Array };

/**
 * Heads of this size or more are copied into a buffer of SNIFF_BYTES kept for reuse: the worker
 * sends it back with its answer. A fresh 1 MiB buffer per upload, freed only by the collector,
 * kept V8's concurrent marking busy under 1 MB uploads (about half of Assay's CPU in some rounds).
 */
const POOLED_HEAD_BYTES = 64 * 1024;
/** Buffers kept for reuse: as many heads as are usually out with the worker at once. */
const POOLED_HEADS = 4;

/**
 * A libmagic call not answered within this fails (503 for an upload, a retry for a job). If the
 * worker answered nothing else in that time it is hung: it is terminated and replaced, and every
 * call waiting on it fails. libmagic takes 0.5-10 ms for a 1 MiB head on an idle core (random bytes
 * ~1 ms, Latin-1 text ~8 ms), several times that on a busy machine (17 and 58 ms were seen), so this
 * trips on a hang, not on a busy queue.
 */
export const DETECT_TIMEOUT_MS = 10_000;
/** A worker not ready within this failed to start (it takes ~150 ms; ~1-2 s under tsx). */
const START_TIMEOUT_MS = 30_000;
/**
 * After a failure the worker is restarted after a delay that doubles with each failure in a row
 * (a crash loop backs off instead of spinning), from 100 ms up to 30 s. A worker that answered a
 * call starts the count again: content that kills it costs one quick restart, not a growing outage.
 */
const RESTART_BASE_MS = 100;
const RESTART_MAX_MS = 30_000;

/** Content type detection failed: the item cannot be examined now (the engine may come back). */
export class ContentTypeUnavailableError extends Error {
  /**
   * `notReached`: the worker was down or restarting, so this content never reached it and cannot
   * be what made it fail (an outage, whatever a later probe finds).
   */
  constructor(
    readonly reason: string,
    readonly notReached = false,
  ) {
    super(`content type detection failed: ${reason}`);
  }
}

/**
 * Faults for tests only (the service never sets them): content holding a marker makes the worker
 * hang, exit or fail; `failStart` decides, per start (0 first), whether the worker fails to start.
 */
export interface DetectorTestHooks {
  hangOn?: string;
  exitOn?: string;
  failOn?: string;
  failStart?: (start: number) => boolean;
  timeoutMs?: number;
}

interface PendingCall {
  resolve: (type: string) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * Media type detection: fast rules for UTF-8 text, libmagic (compiled to WASM) for binary content,
 * in its two tiers (libmagic.ts, magic-tiers.ts). The reduced tier answers here, in the calling
 * thread: content no removed test can match (random, encrypted, compressed data of no known
 * format) costs it 0.03-0.16 ms for a random head of 4 KB to 1 MiB (~0.7 ms the most seen on a
 * hostile one: magic-tiers-timed.test.ts), less than handing the head to a thread and back (at
 * 4 KB, that hand-off was about a sixth of Assay's CPU per ICAP request). The
 * full database (0.1-10 ms a head, more for text in odd encodings) runs in a worker thread, in
 * parallel with clamd's scan, so the event loop stays free for other requests. A failed, hung or
 * restarting worker makes the calls that need it fail (never a made-up type): the detector
 * restarts it by itself. The test hooks turn the reduced tier here off, so that every head reaches
 * the worker they fault.
 */
export class ContentTypeDetector {
  private readonly pending = new Map<number, PendingCall>();
  private nextId = 0;
  private worker: Worker | null = null;
  /** When the worker last answered (or became ready): a call timing out after that is a hang. */
  private lastAnswerAt = 0;
  private starts = 0;
  private failuresInARow = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly timeoutMs: number;
  /** Buffers of SNIFF_BYTES back from the worker, for the next large heads. */
  private readonly pooledHeads: ArrayBuffer[] = [];

  private constructor(
    private readonly log: (message: string) => void,
    private readonly hooks: DetectorTestHooks,
    /** The reduced tier in this thread; null: the worker answers every head (with both tiers). */
    private reduced: ReducedTier | null,
  ) {
    this.timeoutMs = hooks.timeoutMs ?? DETECT_TIMEOUT_MS;
  }

  /** Starts libmagic's worker; fails when it cannot start (the service does not start then). */
  static async create(
    log: (message: string) => void = () => {},
    hooks: DetectorTestHooks = {},
  ): Promise<ContentTypeDetector> {
    let reduced: ReducedTier | null = null;
    if (Object.keys(hooks).length === 0) {
      reduced = await ReducedTier.create().catch((error: Error) => {
        log(
          `libmagic's reduced tier could not load here (${error.message}): the worker answers every head`,
        );
        return null;
      });
      // Its start's buffers (wasmagic's binary as read, the 10.8 MB database) are garbage now: an
      // idle service would keep them resident until its first full collection.
      collectAllGarbage();
    }
    const detector = new ContentTypeDetector(log, hooks, reduced);
    await detector.startWorker();
    return detector;
  }

  /** Whether libmagic's worker is running (it is restarted after a failure). */
  get available(): boolean {
    return this.worker !== null;
  }

  /**
   * The media type of content whose first bytes are `head` (one buffer, or the chunks as they
   * came: at most SNIFF_BYTES of them are read). `complete` says the head is the whole content,
   * so a JSON document can be parsed whole. Rejects with ContentTypeUnavailableError when
   * libmagic is needed and fails.
   */
  async detect(head: Buffer | readonly Buffer[], complete: boolean): Promise<string> {
    const bytes = this.copyHead(Buffer.isBuffer(head) ? [head] : head);
    const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
    if (view.length > 0 && isUtf8Text(view)) {
      const type = classifyText(view, complete);
      this.reuse(bytes);
      return type;
    }
    const type = this.answerHere(view);
    if (type !== null) {
      this.reuse(bytes);
      return type;
    }
    return this.askWorker(bytes);
  }

  /** The reduced tier's answer, or null when the full database must answer (in the worker). */
  private answerHere(head: Buffer): string | null {
    if (this.reduced === null || head.length === 0) return null;
    try {
      const answer = this.reduced.detect(head);
      return answer === null ? null : mediaTypeOf(answer);
    } catch (error) {
      // Its WASM state may be damaged: the worker answers every head from now on (with both tiers
      // from its next start).
      this.reduced = null;
      this.log(
        `libmagic's reduced tier failed here (${error instanceof Error ? error.message : String(error)}); the worker answers every head from now on`,
      );
      return null;
    }
  }

  /** libmagic with its whole magic file, whatever the content (the tests' reference). */
  detectWithLibmagic(head: Buffer): Promise<string> {
    return this.askWorker(this.copyHead([head]));
  }

  /**
   * The first SNIFF_BYTES of `chunks` in one buffer the worker can own: moved to it, not cloned,
   * and moved back with the answer (a clone stays in the worker as garbage, and the worker
   * allocates so little that it collected it only once 64 MB of heads had piled up).
   */
  private copyHead(chunks: readonly Buffer[]): Uint8Array<ArrayBuffer> {
    let length = 0;
    for (const chunk of chunks) length += chunk.length;
    length = Math.min(length, SNIFF_BYTES);
    const buffer =
      length >= POOLED_HEAD_BYTES
        ? (this.pooledHeads.pop() ?? new ArrayBuffer(SNIFF_BYTES))
        : new ArrayBuffer(length);
    const bytes = new Uint8Array(buffer, 0, length);
    let at = 0;
    for (const chunk of chunks) {
      if (at >= length) break;
      const part = chunk.subarray(0, length - at);
      bytes.set(part, at);
      at += part.length;
    }
    return bytes;
  }

  /** Keeps a head's buffer for the next large head. */
  private reuse(bytes: Uint8Array): void {
    const buffer = bytes.buffer;
    if (
      buffer instanceof ArrayBuffer &&
      buffer.byteLength === SNIFF_BYTES &&
      this.pooledHeads.length < POOLED_HEADS
    ) {
      this.pooledHeads.push(buffer);
    }
  }

  private askWorker(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
    const worker = this.worker;
    if (worker === null) {
      this.reuse(bytes);
      return Promise.reject(
        new ContentTypeUnavailableError(
          this.closed ? 'the detector is closed' : 'libmagic is restarting after a failure',
          true,
        ),
      );
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.timedOut(id), this.timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve, reject, timer });
      worker.postMessage({ id, head: bytes }, [bytes.buffer]);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    this.restartTimer = null;
    const worker = this.worker;
    this.worker = null;
    this.failPending('the detector is closed');
    await worker?.terminate();
  }

  private timedOut(id: number): void {
    const call = this.pending.get(id);
    if (call === undefined) return;
    this.pending.delete(id);
    const why = `libmagic did not answer within ${this.timeoutMs} ms`;
    call.reject(new ContentTypeUnavailableError(why));
    // Answers for other calls meanwhile: a long queue, not a hang.
    if (Date.now() - this.lastAnswerAt >= this.timeoutMs) this.recycle(`hung: ${why}`);
  }

  private failPending(why: string): void {
    for (const call of this.pending.values()) {
      clearTimeout(call.timer);
      call.reject(new ContentTypeUnavailableError(why));
    }
    this.pending.clear();
  }

  /** Ends the current worker (if it is still the current one), fails its calls, restarts later. */
  private recycle(why: string, worker = this.worker): void {
    if (worker === null || worker !== this.worker) return;
    this.worker = null;
    this.failPending(why);
    worker.terminate().catch(() => undefined);
    this.scheduleRestart(why);
  }

  private scheduleRestart(why: string): void {
    if (this.closed || this.restartTimer !== null) return;
    const delay = Math.min(RESTART_MAX_MS, RESTART_BASE_MS * 2 ** this.failuresInARow);
    this.failuresInARow++;
    this.log(`content type worker failed (${why}); restarting it in ${delay} ms`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.closed) return;
      this.startWorker().catch((error: Error) => this.scheduleRestart(error.message));
    }, delay);
    this.restartTimer.unref();
  }

  private startWorker(): Promise<void> {
    const start = this.starts++;
    const worker = spawnContentTypeWorker({
      hangOn: this.hooks.hangOn,
      exitOn: this.hooks.exitOn,
      failOn: this.hooks.failOn,
      failStart: this.hooks.failStart?.(start) ?? false,
      // The heads that reach the worker take the full database, unless this thread has no tier.
      tiered: this.reduced === null,
    });
    return new Promise((resolve, reject) => {
      let started = false;
      let abandoned = false;
      let failure = '';
      const startTimer = setTimeout(() => {
        abandoned = true;
        worker.terminate().catch(() => undefined);
        reject(new Error(`the content type worker was not ready within ${START_TIMEOUT_MS} ms`));
      }, START_TIMEOUT_MS);
      startTimer.unref();
      worker.on('message', (reply: Reply) => {
        if ('ready' in reply) {
          clearTimeout(startTimer);
          if (this.closed || abandoned) {
            worker.terminate().catch(() => undefined);
            reject(new Error('the detector is closed'));
            return;
          }
          started = true;
          this.worker = worker;
          this.lastAnswerAt = Date.now();
          resolve();
          return;
        }
        this.answer(worker, reply);
      });
      worker.on('error', (error) => {
        failure = error.message; // the exit follows
      });
      worker.on('exit', (code) => {
        clearTimeout(startTimer);
        const why = failure === '' ? `the worker exited (${code})` : failure;
        if (!started) reject(new Error(`the content type worker could not start: ${why}`));
        else this.recycle(why, worker);
      });
    });
  }

  private answer(worker: Worker, reply: Exclude<Reply, { ready: true }>): void {
    this.reuse(reply.head);
    if (worker !== this.worker) return; // a replaced worker's late answer
    this.lastAnswerAt = Date.now();
    const call = this.pending.get(reply.id);
    if (call === undefined) return; // timed out already
    this.pending.delete(reply.id);
    clearTimeout(call.timer);
    if ('error' in reply) {
      // libmagic threw: its WASM state may be damaged, so the worker is replaced too.
      const why = `libmagic failed: ${reply.error}`;
      call.reject(new ContentTypeUnavailableError(why));
      this.recycle(why);
      return;
    }
    this.failuresInARow = 0;
    call.resolve(mediaTypeOf(reply.type));
  }
}

/** libmagic's answer without its parameters, under the vendor's name where it has one. */
function mediaTypeOf(answer: string): string {
  const type = answer.split(';')[0]?.trim() || 'application/octet-stream';
  return VENDOR_NAMES[type] ?? type;
}

/** What the worker is told at start; only tests set the faults. */
export interface WorkerSettings {
  hangOn?: string;
  exitOn?: string;
  failOn?: string;
  failStart: boolean;
  /** Load both tiers (the calling thread has none), or the full database only. */
  tiered: boolean;
}

/** The worker runs the compiled .js file; under tsx (tests, development) it registers tsx first. */
export function spawnContentTypeWorker(workerData: WorkerSettings): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    return new Worker(new URL('./content-type-worker.js', import.meta.url), { workerData });
  }
  const entry = new URL('./content-type-worker.ts', import.meta.url).href;
  const bootstrap = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData });
}
