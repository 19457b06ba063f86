import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { AggregatorRegistry, type Registry } from 'prom-client';

/**
 * One scrape of a `serve --processes N` instance covers every child: the child that receives
 * GET /metrics asks the primary over IPC; the primary gathers every child's registry with
 * prom-client's AggregatorRegistry (its own messages, over the same IPC) and answers the sum.
 * The primary serves no HTTP, so the service's port answers for all of them.
 */

const SCRAPE_REQUEST = 'assay:metrics-request';
const SCRAPE_ANSWER = 'assay:metrics-answer';
/** Above prom-client's own wait for the children's answers (5 s). */
const CLUSTER_SCRAPE_TIMEOUT_MS = 6_000;

interface ScrapeRequest {
  type: typeof SCRAPE_REQUEST;
  id: number;
}

type ScrapeAnswer = { type: typeof SCRAPE_ANSWER; id: number } & (
  | { text: string }
  | { error: string }
);

function isMessage<T extends { type: string }>(message: unknown, type: T['type']): message is T {
  return (
    typeof message === 'object' &&
    message !== null &&
    (message as { type?: unknown }).type === type &&
    typeof (message as { id?: unknown }).id === 'number'
  );
}

/** In the `--processes` primary: answers each child's scrape with every child's metrics. */
export function aggregateChildMetrics(logger: Logger): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isMessage<ScrapeRequest>(message, SCRAPE_REQUEST)) return;
    const answer = (body: { text: string } | { error: string }) => {
      const reply: ScrapeAnswer = { type: SCRAPE_ANSWER, id: message.id, ...body };
      // The child may have died since it asked: nobody is left to answer.
      if (worker.isConnected()) worker.send(reply);
    };
    aggregator.clusterMetrics().then(
      (text) => answer({ text }),
      (error: unknown) => {
        logger.warn({ err: error }, "could not gather the processes' metrics");
        answer({ error: error instanceof Error ? error.message : String(error) });
      },
    );
  });
}

/** Whether this process is a child of `serve --processes`, whose scrapes ask the primary. */
export function inCluster(): boolean {
  return cluster.isWorker;
}

const pending = new Map<number, (answer: ScrapeAnswer | null) => void>();
let nextId = 0;
let listening = false;

/**
 * In a child: `registries` answer the primary's gathering (prom-client listens once an
 * AggregatorRegistry exists), and a scrape asks the primary for the sum of all the children.
 */
export function shareWithPrimary(registries: readonly Registry[]): void {
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([...registries]);
  if (listening) return;
  listening = true;
  process.on('message', (message: unknown) => {
    if (!isMessage<ScrapeAnswer>(message, SCRAPE_ANSWER)) return;
    pending.get(message.id)?.(message);
  });
}

/** Every child's metrics, summed by the primary. */
export function scrapeCluster(): Promise<string> {
  const id = nextId++;
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => settle(null), CLUSTER_SCRAPE_TIMEOUT_MS);
    const settle = (answer: ScrapeAnswer | null) => {
      clearTimeout(timer);
      pending.delete(id);
      if (answer === null) reject(new Error('the primary did not answer the scrape in time'));
      else if ('text' in answer) resolve(answer.text);
      else reject(new Error(`the primary could not gather the metrics: ${answer.error}`));
    };
    pending.set(id, settle);
    const request: ScrapeRequest = { type: SCRAPE_REQUEST, id };
    process.send?.(request);
  });
}
