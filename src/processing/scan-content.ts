import { createHash } from 'node:crypto';
import type { ClaimedVerdicts, DetectionCategory } from '../domain/records.js';
import {
  type ClamdClient,
  ClamdUnavailableError,
  type InstreamScan,
} from '../engines/clamav/clamd-client.js';
import {
  clamdSignatureToFinding,
  type FindingsStyle,
  notFullyExamined,
  type UnexaminedOutcome,
} from '../engines/clamav/findings.js';
import {
  type ContentTypeDetector,
  ContentTypeUnavailableError,
  SNIFF_BYTES,
} from '../engines/content-type.js';
import type { ContentEngine, EngineReport } from '../engines/engine.js';
import { noteStreamedBytes } from '../stream-memory.js';
import {
  ContentNotExaminedError,
  ContentTooLargeError,
  EmptyContentError,
  EngineUnavailableError,
} from './errors.js';
import { type ProcessingEvents, UNOBSERVED } from './processing-events.js';
import type { VerdictCache } from './verdict-cache.js';

/** Everything the engines say about one piece of content. */
export interface ContentVerdict {
  checksum: string;
  sha256: string;
  contentLength: number;
  contentType: string;
  findings: string[];
  /** What each engine said, for the trace (nothing for a reused verdict). */
  engineReports: string[];
  /**
   * The verdict cache's key this verdict answers later items under, stored with the result: set
   * for a complete verdict scanned now; null for a reused or partial one, or without the cache.
   */
  cacheKey: string | null;
  /** The earlier result whose verdict this is, when the content was not scanned again. */
  reusedFrom: { id: string; receivedAt: string } | null;
}

export interface ScanOptions {
  maxBytes: number;
  /** The key's detection categories: only their engines run. */
  categories: readonly DetectionCategory[];
  /** Abandons the scan (a deadline passed): clamd's stream is dropped, engines are aborted. */
  signal?: AbortSignal;
  /**
   * The account the item is for: an earlier verdict for the same content may answer it (see
   * VerdictCache). Without one the content is always scanned (the engine probe).
   */
  accountId?: string;
  /** The content's earlier verdicts, found with its job's claim: the store is not asked again. */
  earlierVerdicts?: ClaimedVerdicts;
}

/** An engine examining one item longer than this has failed (its own caps are usually lower). */
const ENGINE_TIME_LIMIT_MS = 120_000;

export interface ContentScannerOptions {
  findingsStyle: FindingsStyle;
  /** Content clamd could not fully examine: reported as its finding, or as an error. */
  unexamined: UnexaminedOutcome;
  cache?: VerdictCache | null;
  /** clamd's engine and signature versions for the trace (null: unknown now). */
  signatureVersions?: () => Promise<string | null>;
  /** Told what the scan does (engine answers and failures, cache lookups): the metrics. */
  events?: ProcessingEvents;
}

/**
 * Scans content in one streaming pass: SHA-1 and SHA-256, the media type from the first bytes, and
 * clamd (MALWARE): its INSTREAM, with backpressure from clamd to the source, or a file it is handed
 * at the end (ClamdClient, "clamd by descriptor" in ARCHITECTURE.md). Content the other enabled
 * engines want (images, text, documents; they need it whole) is held in memory up to their size
 * limit and dropped as soon as the media type shows no engine wants it. Engines run in parallel.
 *
 * With the verdict cache, an item whose SHA-256 (known when the stream ends) has a verdict under
 * the same versions is answered with it: clamd's stream is dropped before its end (clamd never
 * scans it) and its type is not detected again. So that small content costs clamd nothing then,
 * clamd's connection waits for the first SNIFF_BYTES (held for type detection anyway): content
 * that ends within them is looked up before clamd hears of it. Larger content streams into clamd
 * as it arrives, as without the cache; nothing more than those first bytes is ever held for it.
 */
export class ContentScanner {
  private readonly findingsStyle: FindingsStyle;
  private readonly unexamined: UnexaminedOutcome;
  private readonly cache: VerdictCache | null;
  private readonly events: ProcessingEvents;

  constructor(
    private readonly clamd: ClamdClient,
    private readonly detector: ContentTypeDetector,
    private readonly engines: readonly ContentEngine[],
    private readonly options: ContentScannerOptions,
  ) {
    this.findingsStyle = options.findingsStyle;
    this.unexamined = options.unexamined;
    this.cache = options.cache ?? null;
    this.events = options.events ?? UNOBSERVED;
  }

  async scan(source: AsyncIterable<Buffer>, options: ScanOptions): Promise<ContentVerdict> {
    const enabled = new Set(options.categories);
    const engines = this.engines.filter((engine) => enabled.has(engine.category));
    const malware = enabled.has('MALWARE');
    if (!malware && engines.length === 0) {
      throw new ContentNotExaminedError(
        'no detection category is enabled for this key: nothing would examine the content',
      );
    }
    const { accountId, signal } = options;
    // Read while clamd scans: the versions it scans with are these or newer (read each second).
    const signatureVersions = malware ? (this.options.signatureVersions?.() ?? null) : null;
    // Where an earlier verdict may answer: the cache on, and an account the item is for.
    const reuse =
      accountId !== undefined && this.cache?.enabled ? { cache: this.cache, accountId } : null;
    const holdLimit = Math.max(0, ...engines.map((engine) => engine.maxBytes));
    let held: Buffer[] | null = engines.length > 0 ? [] : null;
    let heldBytes = 0;
    const sha1 = createHash('sha1');
    const sha256 = createHash('sha256');
    const head: Buffer[] = [];
    let headBytes = 0;
    let length = 0;
    // Detection runs in a worker; it starts once the head is known, in parallel with the scan.
    let contentType: Promise<string> | null = null;
    let typeKnown = false;
    const detect = (complete: boolean) => {
      const detected = this.timed('content-type', this.detector.detect(head, complete));
      // Stop holding content as soon as no enabled engine wants its type (or it has none: the
      // item fails when its type is awaited).
      void detected.then(
        (type) => {
          typeKnown = true;
          if (!engines.some((engine) => engine.wants(type))) held = null;
        },
        () => {
          typeKnown = true;
          held = null;
        },
      );
      return detected;
    };
    let instream: InstreamScan | null = null;
    // With the cache, clamd hears of the content once its head is complete (all of it is in
    // `head` until then), or once the stream ended and no earlier verdict answers it.
    let clamdWaits = malware && reuse !== null;
    const startClamd = async () => {
      clamdWaits = false;
      const scan = this.clamd.instream();
      instream = scan;
      if (signal?.aborted) scan.abort();
      for (const chunk of head) await scan.write(chunk);
    };
    if (malware && reuse === null) instream = this.clamd.instream();
    const abandon = () => instream?.abort();
    signal?.addEventListener('abort', abandon, { once: true });
    try {
      for await (const chunk of source) {
        length += chunk.length;
        noteStreamedBytes(chunk.length);
        if (length > options.maxBytes) throw new ContentTooLargeError(options.maxBytes);
        sha1.update(chunk);
        sha256.update(chunk);
        if (headBytes < SNIFF_BYTES) {
          head.push(chunk);
          headBytes += chunk.length;
          if (headBytes >= SNIFF_BYTES) contentType = detect(false);
        }
        // Past the head, content is held only for an engine that wants its type: the stream waits
        // for the type (libmagic: ~20 ms for 1 MiB) instead. A fast 100 MB upload had 50 MB held
        // (the image engine's limit) before the answer came, for nothing.
        if (held !== null && contentType !== null && !typeKnown) {
          await contentType.catch(() => undefined);
        }
        if (held !== null) {
          heldBytes += chunk.length;
          if (heldBytes > holdLimit) held = null;
          else held.push(chunk);
        }
        if (clamdWaits) {
          if (signal?.aborted) throw new ClamdUnavailableError('scan aborted');
          if (headBytes >= SNIFF_BYTES) await startClamd();
        } else await instream?.write(chunk);
      }
      if (length === 0) throw new EmptyContentError();
      const checksum = sha1.digest('hex');
      const contentSha256 = sha256.digest('hex');
      // Read before clamd is sent the end of the stream: the versions that scan it are these or newer.
      const cacheKey =
        reuse === null
          ? null
          : await reuse.cache.keyOf(reuse.accountId, options.categories, contentSha256);
      const earlier =
        reuse === null || cacheKey === null
          ? null
          : await reuse.cache.find(cacheKey, options.earlierVerdicts);
      if (reuse !== null) this.events.verdictLookedUp(earlier !== null);
      if (earlier !== null) {
        // Not scanned: clamd's stream is dropped before its end, so clamd discards it unscanned.
        (instream as InstreamScan | null)?.abort();
        return {
          checksum,
          sha256: contentSha256,
          contentLength: length,
          contentType: earlier.contentType,
          findings: earlier.findings,
          engineReports: [],
          cacheKey: null,
          reusedFrom: { id: earlier.fileId, receivedAt: earlier.receivedAt },
        };
      }
      if (clamdWaits) await startClamd();
      contentType ??= detect(true);
      const type = await contentType;
      const wanted = engines.filter((engine) => engine.wants(type));
      const content = held === null ? null : Buffer.concat(held);
      const clamdScan = instream as InstreamScan | null;
      const [clamdVerdict, ...engineResults] = await Promise.allSettled([
        clamdScan === null ? Promise.resolve(null) : this.timed('clamav', clamdScan.finish()),
        ...wanted.map((engine) =>
          this.timed(engine.name, this.examine(engine, content, length, type, signal)),
        ),
      ]);
      if (clamdVerdict?.status === 'rejected') throw clamdVerdict.reason;
      const clamdSignature =
        clamdVerdict?.status === 'fulfilled' ? (clamdVerdict.value?.signature ?? null) : null;
      const { findings, reports, complete } = this.combine(
        malware,
        clamdSignature,
        await signatureVersions,
        engines,
        wanted,
        engineResults as PromiseSettledResult<EngineReport>[],
        type,
      );
      this.events.contentScanned(length);
      return {
        checksum,
        sha256: contentSha256,
        contentLength: length,
        contentType: type,
        findings,
        engineReports: reports,
        // A partial verdict (an engine failed beside a finding) is never reused.
        cacheKey: complete ? cacheKey : null,
        reusedFrom: null,
      };
    } catch (error) {
      (instream as InstreamScan | null)?.abort();
      if (error instanceof ClamdUnavailableError) {
        // A scan abandoned on purpose (its deadline passed) is not clamd's failure.
        if (!signal?.aborted) this.events.engineFailed('clamav');
        throw new EngineUnavailableError('malware', error.message, error.notReached);
      }
      // Without its type the item cannot go to the right engines: an outage, like clamd's.
      if (error instanceof ContentTypeUnavailableError) {
        this.events.engineFailed('content-type');
        throw new EngineUnavailableError('content type', error.reason, error.notReached);
      }
      throw error;
    } finally {
      signal?.removeEventListener('abort', abandon);
    }
  }

  /** The findings and trace lines of what the engines said; `complete`: every engine decided. */
  private combine(
    malware: boolean,
    signature: string | null,
    versions: string | null,
    engines: readonly ContentEngine[],
    wanted: readonly ContentEngine[],
    engineResults: readonly PromiseSettledResult<EngineReport>[],
    type: string,
  ): { findings: string[]; reports: string[]; complete: boolean } {
    const unexamined = signature === null ? null : notFullyExamined(signature);
    if (unexamined !== null && this.unexamined === 'error') {
      throw new ContentNotExaminedError(`the content could not be fully examined: ${unexamined}`);
    }
    const findings =
      signature === null ? [] : [clamdSignatureToFinding(signature, this.findingsStyle)];
    const reports = [
      malware
        ? `engine clamav (MALWARE): ${signature === null ? 'clean' : `found ${signature}`}`
        : 'engine clamav (MALWARE): not enabled for this key',
    ];
    if (malware && this.options.signatureVersions !== undefined) {
      reports.push(`engine clamav versions: ${versions ?? 'could not be read'}`);
    }
    const failures: string[] = [];
    wanted.forEach((engine, index) => {
      const result = engineResults[index] as PromiseSettledResult<EngineReport>;
      if (result.status === 'rejected') {
        this.events.engineFailed(engine.name);
        const reason =
          result.reason instanceof Error ? result.reason.message : String(result.reason);
        failures.push(`${engine.category}: ${reason}`);
        reports.push(`engine ${engine.name} (${engine.category}): failed: ${reason}`);
        return;
      }
      findings.push(...result.value.findings);
      reports.push(
        `engine ${engine.name} (${engine.category}): ${result.value.findings.length === 0 ? 'nothing found' : `found ${result.value.findings.join(', ')}`}`,
        ...result.value.trace,
      );
    });
    for (const engine of engines) {
      if (!wanted.includes(engine)) {
        reports.push(`engine ${engine.name} (${engine.category}): does not examine ${type}`);
      }
    }
    if (failures.length > 0) {
      // Without a finding, a failed engine leaves the item unexamined: never a clean result.
      // With one, the item is not clean whatever the failed engine would have said: the
      // finding is reported (dropping malware for an image decoder's error would hide it),
      // and the failure is in the trace.
      if (findings.length === 0) {
        throw new ContentNotExaminedError(
          `the content could not be examined: ${failures.join('; ')}`,
        );
      }
      reports.push(
        `not every engine could examine the content (${failures.join('; ')}); reporting what was found`,
      );
    }
    return { findings, reports, complete: failures.length === 0 };
  }

  /** `work`, with the time it took reported when it succeeds (failures are counted where handled). */
  private timed<T>(engine: string, work: Promise<T>): Promise<T> {
    const started = performance.now();
    return work.then((value) => {
      this.events.engineAnswered(engine, (performance.now() - started) / 1000);
      return value;
    });
  }

  private examine(
    engine: ContentEngine,
    content: Buffer | null,
    length: number,
    type: string,
    abandoned: AbortSignal | undefined,
  ): Promise<EngineReport> {
    if (content === null || content.length > engine.maxBytes) {
      return Promise.reject(
        new Error(
          `${length} bytes of ${type} is more than ${engine.name} examines (${engine.maxBytes})`,
        ),
      );
    }
    const limit = AbortSignal.timeout(ENGINE_TIME_LIMIT_MS);
    return engine.examine(
      content,
      type,
      abandoned === undefined ? limit : AbortSignal.any([limit, abandoned]),
    );
  }
}
