// Worker thread of NsfwLanguageEngine: text extraction and detection off the event loop.
import { workerData } from 'node:worker_threads';
import { LANGUAGE_TEST_MARKER } from '../test-content.js';
import { serveWorkerRequests } from '../worker-side.js';
import { LanguageDetector, type LanguageMatch } from './detect.js';
import { extractText } from './extract.js';

export interface LanguageWorkerSettings {
  englishPrefixChars: number;
  maxTextChars: number;
}

export interface LanguageRequest {
  content: Uint8Array;
  contentType: string;
}

export interface LanguageResult {
  matches: LanguageMatch[];
  textChars: number;
  englishChars: number;
  /** The text holds COMPAT.md's language test sample. */
  testSample: boolean;
}

const settings = workerData as LanguageWorkerSettings;

await serveWorkerRequests<LanguageRequest, LanguageResult>(async () => {
  const detector = new LanguageDetector(settings.englishPrefixChars);
  return async ({ content, contentType }) => {
    const text = await extractText(content, contentType, settings.maxTextChars);
    const { matches, englishChars } = detector.detect(text);
    return {
      result: {
        matches,
        textChars: text.length,
        englishChars,
        testSample: text.includes(LANGUAGE_TEST_MARKER),
      },
    };
  };
});
