// A WorkerPool worker for tests: it fails to start while the file `workerData.failStartWhile`
// exists, exits on the request 'exit', and echoes any other request.
import { existsSync } from 'node:fs';
import { workerData } from 'node:worker_threads';
import { serveWorkerRequests } from '../../src/engines/worker-side.js';

const { failStartWhile } = workerData as { failStartWhile: string };

await serveWorkerRequests<string, string>(async () => {
  if (existsSync(failStartWhile)) throw new Error('told to fail its start');
  return async (request) => {
    if (request === 'exit') process.exit(1);
    return { result: `echo: ${request}` };
  };
});
