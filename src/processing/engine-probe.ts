import { EngineUnavailableError } from './errors.js';
import type { ContentProcessor } from './process-content.js';

/**
 * A few harmless bytes that every engine passes in a millisecond or two. Binary (a NUL, invalid
 * UTF-8), so their type comes from libmagic's worker like any binary item's, not from the text
 * rules that need no worker: a detector that cannot start is an outage, not the item's fault.
 */
const PROBE_CONTENT = Buffer.from(
  'Assay engine probe\u0000\u00ff\u00fe harmless bytes\n',
  'latin1',
);
/** A probe that has not scanned its content by then says the engine is not answering. */
const PROBE_TIMEOUT_MS = 10_000;
/** Pause between the probe's tries: an engine restarting after the item killed it comes back. */
const PROBE_RETRY_MS = 250;
/** The probe waits this long for a restarting detector (0.1 s after a first failure). */
const PROBE_RETRY_WINDOW_MS = 3_000;

/**
 * Tells "this item makes the engine fail" from "the engine fails for everyone": after a job's scan
 * failed, a probe scans known harmless content through the same path (clamd's INSTREAM with its
 * temporary file, or the file it is handed; libmagic's worker). If that works within a few seconds, the engines answer other
 * content and the failure is the item's; if not (clamd down, refusing, erroring or hung; a
 * detector that cannot start), it is an outage.
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
    // The signal drops clamd's stream; the race also covers a part that ignores it.
    const answers = new Promise<boolean>((resolve) => {
      signal.addEventListener('abort', () => resolve(false), { once: true });
      this.scanUntilAnswered(signal).then(resolve, () => resolve(false));
    });
    this.current = { startedAt, answers };
    return answers;
  }

  /**
   * Content that crashed the type detector leaves it restarting for a moment: the probe waits for
   * it (a few seconds at most), since the item, not an outage, is to blame for that.
   */
  private async scanUntilAnswered(signal: AbortSignal): Promise<boolean> {
    const until = Date.now() + PROBE_RETRY_WINDOW_MS;
    while (!signal.aborted) {
      try {
        const scanned = await this.processor.scan(
          (async function* () {
            yield PROBE_CONTENT;
          })(),
          { categories: ['MALWARE'], signal },
        );
        return scanned.verdict.findings.length === 0;
      } catch (error) {
        // Only a detector still restarting is waited for; any other failure answers at once.
        const restarting = error instanceof EngineUnavailableError && error.notReached;
        if (!restarting || Date.now() >= until) return false;
        await new Promise((resolve) => setTimeout(resolve, PROBE_RETRY_MS));
      }
    }
    return false;
  }
}
