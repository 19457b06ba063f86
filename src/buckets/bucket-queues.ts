import { setTimeout as sleep } from 'node:timers/promises';
import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import type { Logger } from 'pino';
import type { BucketSource } from '../domain/records.js';
import type { Store } from '../store/store.js';
import { credentialsOf } from './bucket-client.js';
import { BucketEventError, parseBucketEvent } from './bucket-events.js';
import type { BucketIntake } from './bucket-intake.js';

/** How often the sources are read again (a queue added or changed by the operator). */
const SOURCES_REFRESH_MS = 5_000;
/** The longest wait after a failed receive or a message that could not be handled. */
const MAX_BACKOFF_MS = 30_000;

export interface BucketQueueOptions {
  /** Seconds a receive waits for messages (SQS long polling, at most 20). */
  waitSeconds: number;
  connectTimeoutMs: number;
}

/** What the queues do, for the metrics. */
export interface BucketQueueEvents {
  message(source: BucketSource, outcome: 'handled' | 'test' | 'malformed' | 'deferred'): void;
  receiveFailed(source: BucketSource): void;
}

/**
 * S3 event notifications delivered through SQS, one long-polling loop per source that names a
 * queue. A message is deleted only once every object it announces is queued (durably) or known:
 * a message that could not be handled (the store failing, the key's balance spent) comes back
 * after its visibility timeout, so nothing is lost; S3's delivery is at least once anyway. A
 * message that is no event is logged and deleted (it would come back forever).
 */
export class BucketQueues {
  private readonly loops = new Map<
    string,
    { fingerprint: string; stop: AbortController; done: Promise<void> }
  >();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly intake: BucketIntake,
    private readonly options: BucketQueueOptions,
    private readonly events: BucketQueueEvents,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), SOURCES_REFRESH_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    const loops = [...this.loops.values()];
    for (const loop of loops) loop.stop.abort();
    await Promise.all(loops.map((loop) => loop.done));
    this.loops.clear();
  }

  /** Starts a loop for each source with a queue, restarts changed ones, stops removed ones. */
  private async refresh(): Promise<void> {
    if (this.stopped) return;
    let sources: BucketSource[];
    try {
      sources = (await this.store.bucketSources.list()).filter(
        (source) => source.queueUrl !== null,
      );
    } catch (error) {
      this.logger.warn({ err: error }, 'could not read the bucket sources; will try again');
      return;
    }
    const wanted = new Map(sources.map((source) => [source.id, source]));
    for (const [id, loop] of this.loops) {
      const source = wanted.get(id);
      if (source === undefined || fingerprintOf(source) !== loop.fingerprint) {
        loop.stop.abort();
        await loop.done;
        this.loops.delete(id);
      }
    }
    for (const source of sources) {
      if (this.loops.has(source.id) || this.stopped) continue;
      const stop = new AbortController();
      const done = this.poll(source, stop.signal);
      this.loops.set(source.id, { fingerprint: fingerprintOf(source), stop, done });
    }
  }

  private async poll(source: BucketSource, signal: AbortSignal): Promise<void> {
    const queueUrl = source.queueUrl as string;
    let client: SQSClient;
    let sqs: typeof import('@aws-sdk/client-sqs');
    try {
      // Imported once a queue is watched: a service that watches none does not hold the SDK.
      sqs = await import('@aws-sdk/client-sqs');
      client = sqsClient(sqs, source, queueUrl, this.options);
    } catch (error) {
      this.logger.error(
        { err: error, source: source.name },
        'cannot read the queue of a bucket source',
      );
      return;
    }
    let backoff = 0;
    try {
      while (!signal.aborted) {
        if (backoff > 0) await sleep(backoff, undefined, { signal }).catch(() => {});
        if (signal.aborted) break;
        let messages: Message[];
        try {
          const answer = await client.send(
            new sqs.ReceiveMessageCommand({
              QueueUrl: queueUrl,
              MaxNumberOfMessages: 10,
              WaitTimeSeconds: this.options.waitSeconds,
            }),
            { abortSignal: signal },
          );
          messages = answer.Messages ?? [];
        } catch (error) {
          if (signal.aborted) break;
          this.logger.warn(
            { err: error, source: source.name },
            'could not receive from the queue of a bucket source',
          );
          this.events.receiveFailed(source);
          backoff = nextBackoff(backoff);
          continue;
        }
        let deferred = false;
        for (const message of messages) {
          const handled = await this.handle(source, message);
          if (handled) {
            await client
              .send(
                new sqs.DeleteMessageCommand({
                  QueueUrl: queueUrl,
                  ReceiptHandle: message.ReceiptHandle,
                }),
              )
              .catch((error: unknown) =>
                // Delivered again later: announcing it twice queues nothing twice.
                this.logger.warn(
                  { err: error, source: source.name },
                  'could not delete a handled message',
                ),
              );
          } else {
            deferred = true;
          }
        }
        backoff = deferred ? nextBackoff(backoff) : 0;
      }
    } finally {
      client.destroy();
    }
  }

  /** True when the message may be deleted: handled, or no event at all. */
  private async handle(source: BucketSource, message: Message): Promise<boolean> {
    let event: ReturnType<typeof parseBucketEvent>;
    try {
      event = parseBucketEvent(message.Body ?? '');
    } catch (error) {
      this.logger.warn(
        {
          source: source.name,
          messageId: message.MessageId,
          reason: error instanceof BucketEventError ? error.message : String(error),
        },
        'a message on the queue of a bucket source is no event; deleted',
      );
      this.events.message(source, 'malformed');
      return true;
    }
    if (event.kind === 'test') {
      this.events.message(source, 'test');
      return true;
    }
    try {
      for (const object of event.objects) await this.intake.announce(source, object, 'event');
    } catch (error) {
      this.logger.warn(
        { err: error, source: source.name, messageId: message.MessageId },
        'could not queue the objects of an event; it comes back after its visibility timeout',
      );
      this.events.message(source, 'deferred');
      return false;
    }
    this.events.message(source, 'handled');
    return true;
  }
}

function nextBackoff(backoff: number): number {
  return Math.min(Math.max(1_000, backoff * 2), MAX_BACKOFF_MS);
}

function fingerprintOf(source: BucketSource): string {
  return [
    source.queueUrl,
    source.endpoint,
    source.region,
    source.credentials,
    source.bucket,
    source.prefix,
  ].join('\n');
}

/** SQS at the queue URL's own host (the source's endpoint for an S3-compatible server). */
function sqsClient(
  sqs: typeof import('@aws-sdk/client-sqs'),
  source: BucketSource,
  queueUrl: string,
  options: BucketQueueOptions,
): SQSClient {
  const url = new URL(queueUrl);
  const aws = /^sqs\.([a-z0-9-]+)\.amazonaws\.com$/.exec(url.hostname);
  return new sqs.SQSClient({
    region: aws?.[1] ?? source.region,
    credentials: credentialsOf(source.credentials),
    ...(aws === null ? { endpoint: url.origin } : {}),
    requestHandler: {
      connectionTimeout: options.connectTimeoutMs,
      // A long poll holds the connection open for waitSeconds.
      socketTimeout: (options.waitSeconds + 10) * 1000,
    },
  });
}
