import { availableParallelism } from 'node:os';
import type { ContentEngine, EngineReport } from '../engine.js';
import { WorkerPool } from '../worker-pool.js';
import type { LanguageMatch } from './detect.js';
import { isExtractable } from './extractable.js';
import type { LanguageRequest, LanguageResult, LanguageWorkerSettings } from './language-worker.js';

export interface NsfwLanguageOptions {
  /** Worker threads (each extracts and examines one item at a time). Default: the CPU count, at most 8. */
  poolSize?: number;
  /** Largest content examined. Default 20 MiB. */
  maxBytes?: number;
  /** Longest extracted text examined; longer text is an error. Default 20 Mi characters. */
  maxTextChars?: number;
  /** Time cap per item, on top of the caller's signal. Default 30 s. */
  timeoutMs?: number;
  /** Heap limit of each worker (MB), against documents that expand without bound. Default 1024. */
  workerHeapMb?: number;
  log?: (message: string) => void;
}

const MiB = 1024 * 1024;

export function languageFinding(language: string): string {
  return `content.${language}.language.nsfw.0`;
}

function traceLines(result: LanguageResult, contentType: string): string[] {
  const lines = [`nsfw-language: ${result.textChars} characters of text from ${contentType}`];
  if (result.testSample) lines.push('nsfw-language: en: the language test sample');
  const byLanguage = new Map<string, LanguageMatch[]>();
  for (const match of result.matches) {
    const list = byLanguage.get(match.language) ?? [];
    list.push(match);
    byLanguage.set(match.language, list);
  }
  for (const [language, matches] of [...byLanguage].sort(([a], [b]) => a.localeCompare(b))) {
    // The detector lists the first matches of each language and counts the rest.
    const shown = matches.map((match) => `${match.start}-${match.end} (${match.term})`);
    const count = result.counts[language] ?? matches.length;
    const more = count > matches.length ? ` and ${count - matches.length} more` : '';
    lines.push(`nsfw-language: ${language} at ${shown.join(', ')}${more}`);
  }
  return lines;
}

/**
 * NSFW_LANGUAGE: obscene words in text, HTML, JSON, PDF and DOCX, in English and the languages of
 * word-lists.ts, one finding per language, over the whole text (detect.ts). Offsets (in the
 * extracted text) go into the trace.
 */
export class NsfwLanguageEngine implements ContentEngine {
  readonly name = 'nsfw-language';
  readonly category = 'NSFW_LANGUAGE' as const;
  readonly maxBytes: number;
  private readonly timeoutMs: number;

  private constructor(
    private readonly pool: WorkerPool<LanguageRequest, LanguageResult>,
    options: NsfwLanguageOptions,
  ) {
    this.maxBytes = options.maxBytes ?? 20 * MiB;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  static async create(options: NsfwLanguageOptions = {}): Promise<NsfwLanguageEngine> {
    const settings: LanguageWorkerSettings = {
      maxTextChars: options.maxTextChars ?? 20 * MiB,
    };
    const pool = await WorkerPool.create<LanguageRequest, LanguageResult>({
      name: 'nsfw-language',
      script: 'nsfw-language/language-worker',
      size: options.poolSize ?? Math.min(availableParallelism(), 8),
      workerData: settings,
      resourceLimits: { maxOldGenerationSizeMb: options.workerHeapMb ?? 1024 },
      log: options.log,
    });
    return new NsfwLanguageEngine(pool, options);
  }

  wants(contentType: string): boolean {
    return isExtractable(contentType);
  }

  async examine(content: Buffer, contentType: string, signal: AbortSignal): Promise<EngineReport> {
    if (content.length > this.maxBytes) {
      throw new Error(`nsfw-language examines at most ${this.maxBytes} bytes`);
    }
    // A copy the worker owns: the caller's buffer may be a view into a pooled allocation.
    const copy = new Uint8Array(content);
    const result = await this.pool.run(
      { content: copy, contentType },
      AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]),
      [copy.buffer],
    );
    const languages = new Set(Object.keys(result.counts));
    if (result.testSample) languages.add('en');
    const findings = [...languages].sort().map(languageFinding);
    return { findings, trace: traceLines(result, contentType) };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
