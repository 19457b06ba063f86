// The worker half of WorkerPool: set up once, then answer one request at a time.
import { parentPort } from 'node:worker_threads';

export interface WorkerAnswer<Result> {
  result: Result;
  transfer?: ArrayBuffer[];
}

/** Runs `setup` (e.g. loading a model), reports ready or the start error, then serves requests. */
export async function serveWorkerRequests<Request, Result>(
  setup: () => Promise<(request: Request) => Promise<WorkerAnswer<Result>>>,
): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('this script must run as a worker thread');
  let handle: (request: Request) => Promise<WorkerAnswer<Result>>;
  try {
    handle = await setup();
  } catch (error) {
    port.postMessage({ startError: error instanceof Error ? error.message : String(error) });
    return;
  }
  port.on('message', ({ id, request }: { id: number; request: Request }) => {
    handle(request).then(
      ({ result, transfer }) => port.postMessage({ id, result }, transfer ?? []),
      (error: unknown) =>
        port.postMessage({ id, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  port.postMessage({ ready: true });
}
