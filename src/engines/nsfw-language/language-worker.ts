// Worker thread of NsfwLanguageEngine: text extraction and detection off the event loop.
import { workerData } from 'node:worker_threads';
import { LANGUAGE_TEST_MARKER } from '../test-content.js';
import { serveWorkerRequests } from '../worker-side.js';
import { type DetectionResult, LanguageDetector } from './detect.js';
import { extractText } from './extract.js';

export interface LanguageWorkerSettings {
  maxTextChars: number;
}

export interface LanguageRequest {
  content: Uint8Array;
  contentType: string;
}

export interface LanguageResult extends DetectionResult {
  textChars: number;
  /** The text holds COMPAT.md's language test sample. */
  testSample: boolean;
}

const settings = workerData as LanguageWorkerSettings;

await serveWorkerRequests<LanguageRequest, LanguageResult>(async () => {
  const detector = new LanguageDetector();
  return async ({ content, contentType }) => {
    const text = await extractText(content, contentType, settings.maxTextChars);
    return {
      result: {
        ...detector.detect(text),
        textChars: text.length,
        testSample: text.includes(LANGUAGE_TEST_MARKER),
      },
    };
  };
});
