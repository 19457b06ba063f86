import type { ContentProcessor } from './process-content.js';

/** A few bytes of plain text: every engine gives them a verdict in a millisecond or two. */
const PROBE_CONTENT = Buffer.from('Assay engine probe: plain text that every engine passes.\n');
/** A probe slower than this says the engine is not answering (overloaded or hung). */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * Tells "this item makes the engine fail" from "the engine fails for everyone": after a job's scan
 * failed, a probe scans known harmless content through the same path (clamd's INSTREAM with its
 * temporary file, the type detector). If that works, the engine answers other content and the
 * failure is the item's; if not (clamd down, refusing, erroring or hung), it is an outage.
 * A probe in flight is shared by the failures that happened before it started.
 */
export class EngineProbe {
  private current: { startedAt: number; answers: Promise<boolean> } | null = null;

  constructor(private readonly processor: ContentProcessor) {}

  /** Whether the engine scanned the probe content, by a probe started no earlier than `since`. */
  answers(since: number): Promise<boolean> {
    if (this.current !== null && this.current.startedAt >= since) return this.current.answers;
    const startedAt = Date.now();
    const signal = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    const scan = this.processor.scan(
      (async function* () {
        yield PROBE_CONTENT;
      })(),
      { categories: ['MALWARE'], signal },
    );
    // The signal drops clamd's stream; the race also covers a part that ignores it.
    const answers = new Promise<boolean>((resolve) => {
      signal.addEventListener('abort', () => resolve(false), { once: true });
      scan.then(
        (scanned) => resolve(scanned.verdict.findings.length === 0),
        () => resolve(false),
      );
    });
    this.current = { startedAt, answers };
    return answers;
  }
}
