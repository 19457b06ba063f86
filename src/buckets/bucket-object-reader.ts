import { BucketUnavailableError, SpoolTooLargeError } from '../domain/failures.js';
import type { Job, TraceEvent } from '../domain/records.js';
import type { ObjectSource, SpoolTarget } from '../processing/object-source.js';
import { event } from '../processing/process-content.js';
import { RemoteContentError } from '../processing/remote-content.js';
import { BucketRequestError } from './bucket-client.js';
import type { BucketClients } from './bucket-clients.js';
import { objectOfJob } from './object-jobs.js';
import { deniedMessage, unsupportedMessage } from './object-status.js';

/**
 * The download stage of an object's job: the object streams from its bucket into the spool,
 * pinned to the version it was announced with. What the object is to blame for ends its job as a
 * result whose error starts with its status (object-status.ts); a bucket that does not answer is
 * waited out.
 */
export class BucketObjectReader implements ObjectSource {
  constructor(private readonly clients: BucketClients) {}

  async download(
    job: Job,
    maxBytes: number,
    target: SpoolTarget,
  ): Promise<{ key: string; size: number; downloaded: TraceEvent }> {
    const found = objectOfJob(job);
    if (found === null)
      throw new RemoteContentError('the job names no object of a bucket', 'refused');
    const { sourceName, object } = found;
    const source = await this.clients.source(sourceName);
    if (source === null) {
      throw new RemoteContentError(
        `the bucket source ${sourceName} was removed before the object was read`,
        'unavailable',
      );
    }
    const where = `s3://${source.bucket}/${object.key}`;
    try {
      const client = this.clients.client(source);
      const { body, size } = await client.read(object);
      if (size > maxBytes) {
        // Known from its length: not a byte is read.
        (body as { destroy?: () => void }).destroy?.();
        throw new SpoolTooLargeError();
      }
      const spooled = await target.spool.write(target.spoolId, body, maxBytes, {
        durable: target.durable,
      });
      return { ...spooled, downloaded: event(`downloaded: ${spooled.size} bytes from ${where}`) };
    } catch (error) {
      throw objectFailure(error, sourceName, maxBytes);
    }
  }
}

/** What a failed read means for the object's job. */
function objectFailure(error: unknown, sourceName: string, maxBytes: number): Error {
  if (error instanceof SpoolTooLargeError) {
    return new RemoteContentError(
      unsupportedMessage(`the object is over ${maxBytes} bytes, the most that is scanned`),
      'too-large',
    );
  }
  if (!(error instanceof BucketRequestError)) {
    // The spool's own failures are told apart by the job runner; a stream cut short is the bucket's.
    if (error instanceof Error && error.name === 'SpoolUnavailableError') return error;
    return new BucketUnavailableError(sourceName, error);
  }
  switch (error.failure) {
    case 'denied':
      return new RemoteContentError(deniedMessage(error.message), 'refused');
    case 'unsupported':
      return new RemoteContentError(
        unsupportedMessage(
          `the object is encrypted with a key this service may not use (${error.message})`,
        ),
        'refused',
      );
    case 'missing':
      return new RemoteContentError('the object was deleted before it was read', 'unavailable');
    case 'changed':
      return new RemoteContentError(
        'the object was replaced before it was read: its new content is scanned on its own',
        'unavailable',
      );
    default:
      return new BucketUnavailableError(sourceName, error);
  }
}
