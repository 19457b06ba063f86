import { after, before } from 'node:test';
import { NsfwLanguageEngine } from '../../src/engines/nsfw-language/engine.js';

/** The language engine's finding for English. */
export const EN = 'content.en.language.nsfw.0';
export const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/** Time enough for any one examination of the tests. */
export const signal = () => AbortSignal.timeout(60_000);

/**
 * A language engine of one worker for a describe's tests: created before them, closed after.
 * Read `engine` inside tests (it exists only once the `before` has run).
 */
export function useLanguageEngine(): {
  readonly engine: NsfwLanguageEngine;
  examine: (content: Buffer, type: string) => ReturnType<NsfwLanguageEngine['examine']>;
} {
  let engine: NsfwLanguageEngine | null = null;
  before(async () => {
    engine = await NsfwLanguageEngine.create({ poolSize: 1 });
  });
  after(() => engine?.close());
  const started = (): NsfwLanguageEngine => {
    if (engine === null) throw new Error('the language engine is not created yet');
    return engine;
  };
  return {
    get engine() {
      return started();
    },
    examine: (content, type) => started().examine(content, type, signal()),
  };
}
