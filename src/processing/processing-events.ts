/**
 * What the processing services tell about their work as it happens, for the metrics (src/metrics
 * implements it). Each call is synchronous and cheap: it is made once per item, engine answer or
 * callback attempt, never per chunk of content.
 */
export interface ProcessingEvents {
  /** An engine answered for one item; clamd: from the end of the stream to its verdict. */
  engineAnswered(engine: string, seconds: number): void;
  /** An engine could not answer for one item (down, erroring, over its time). */
  engineFailed(engine: string): void;
  /** The verdict cache was asked for content: `reused`, an earlier verdict answered it. */
  verdictLookedUp(reused: boolean): void;
  /** Content reached a verdict by being scanned (not reused). */
  contentScanned(bytes: number): void;
  /** A result was recorded: its findings, or null for an item that ended in an error. */
  itemRecorded(findings: readonly string[] | null): void;
  /** A callback attempt ended: delivered, or failed (retried later, or given up with it). */
  callbackAttempted(outcome: 'delivered' | 'failed'): void;
  /** Callbacks given up for good, never delivered. */
  callbacksGivenUp(count: number): void;
}

/** Nothing is told: services built without metrics (tools, tests of one part). */
export const UNOBSERVED: ProcessingEvents = {
  engineAnswered() {},
  engineFailed() {},
  verdictLookedUp() {},
  contentScanned() {},
  itemRecorded() {},
  callbackAttempted() {},
  callbacksGivenUp() {},
};
