// Worker thread of NsfwImageEngine: one copy of the model, one inference at a time.
import { workerData } from 'node:worker_threads';
import { serveWorkerRequests } from '../worker-side.js';
import { type ClassScores, type ImageRuntime, loadClassifier } from './classifier.js';

export interface ClassifierWorkerSettings {
  modelDir: string;
  runtime: ImageRuntime;
  /** Inference threads of this worker's model (onnx). */
  threads: number;
}

export interface ClassifyRequest {
  pixels: Uint8Array;
}

export interface ClassifyResult {
  scores: ClassScores;
}

const settings = workerData as ClassifierWorkerSettings;

await serveWorkerRequests<ClassifyRequest, ClassifyResult>(async () => {
  const classifier = await loadClassifier(settings.runtime, settings.modelDir, settings.threads);
  return async ({ pixels }) => ({
    result: { scores: await classifier.classify(pixels) },
  });
});
