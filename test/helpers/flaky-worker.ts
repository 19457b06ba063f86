// A WorkerPool worker for tests: it fails to start while the file `workerData.failStartWhile`
// exists, exits on the request 'exit', takes N ms over 'sleep:N', and echoes any request.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { workerData } from 'node:worker_threads';
import { serveWorkerRequests } from '../../src/engines/worker-side.js';

const { failStartWhile } = workerData as { failStartWhile: string };

await serveWorkerRequests<string, string>(async () => {
  if (existsSync(failStartWhile)) throw new Error('told to fail its start');
  return async (request) => {
    if (request === 'exit') process.exit(1);
    if (request.startsWith('sleep:'))
      await sleep(Number.parseInt(request.slice('sleep:'.length), 10));
    return { result: `echo: ${request}` };
  };
});
