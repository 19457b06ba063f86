import type { DetectionCategory } from '../domain/records.js';

/** What an engine found in one item. */
export interface EngineReport {
  findings: string[];
  /** lines for the item's trace */
  trace: string[];
}

/** A detector for one category, examining whole items of the media types it wants. */
export interface ContentEngine {
  /** e.g. 'nsfw-image' */
  readonly name: string;
  readonly category: DetectionCategory;
  /** Largest content it examines; bigger content of a wanted type is an error for the category, never a pass. */
  readonly maxBytes: number;
  /** Whether it examines content of this media type (as Assay's detector reports it, e.g. 'image/jpeg', 'text/plain', 'application/pdf'). */
  wants(contentType: string): boolean;
  /** Examines the complete content. Throws (an Error with a clear message) when it cannot decide. Honours the signal (time cap). */
  examine(content: Buffer, contentType: string, signal: AbortSignal): Promise<EngineReport>;
  close(): Promise<void>;
}
