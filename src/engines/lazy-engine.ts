import type { DetectionCategory } from '../domain/records.js';
import type { ContentEngine, EngineReport } from './engine.js';

/**
 * An engine whose workers start on first use: the NSFW models cost about a second and 130 MB per
 * worker, which a server that never sees an image (or a test that starts one) should not pay.
 * A failed start is retried by the next item rather than remembered.
 */
export class LazyEngine implements ContentEngine {
  private started: Promise<ContentEngine> | null = null;

  constructor(
    readonly name: string,
    readonly category: DetectionCategory,
    readonly maxBytes: number,
    private readonly wantsType: (contentType: string) => boolean,
    private readonly create: () => Promise<ContentEngine>,
  ) {}

  wants(contentType: string): boolean {
    return this.wantsType(contentType);
  }

  async examine(content: Buffer, contentType: string, signal: AbortSignal): Promise<EngineReport> {
    this.started ??= this.create();
    let engine: ContentEngine;
    try {
      engine = await this.started;
    } catch (error) {
      this.started = null;
      throw error;
    }
    return engine.examine(content, contentType, signal);
  }

  async close(): Promise<void> {
    const started = this.started;
    this.started = null;
    const engine = await started?.catch(() => null);
    await engine?.close();
  }
}
