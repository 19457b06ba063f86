import type { FastifyInstance } from 'fastify';
import { BucketEventError, MAX_EVENT_BYTES } from '../../buckets/bucket-events.js';
import { SourceKeyError } from '../../buckets/bucket-intake.js';
import { WebhookAuthError } from '../../buckets/bucket-webhooks.js';
import { BalanceSpentError } from '../../processing/errors.js';
import { HttpError } from '../http-error.js';

const CHALLENGE = { 'www-authenticate': 'Bearer realm="Assay bucket events"' };

/**
 * POST /bucket-events/:source: a watched bucket's events from a MinIO-style webhook (issue 42).
 * Not behind API keys: the source's own bearer token. The body is JSON, at most 1 MiB, read only
 * here. 200 with what became of the announced objects; 401, 400 with the reason, or 503 (retry:
 * nothing was lost).
 */
export default async function bucketEvents(app: FastifyInstance) {
  const webhooks = app.services.bucketWebhooks;
  if (webhooks === null) return;
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string', bodyLimit: MAX_EVENT_BYTES },
    (_request, body, done) => done(null, String(body)),
  );
  app.post<{ Params: { source: string } }>('/bucket-events/:source', async (request) => {
    let counts: Awaited<ReturnType<typeof webhooks.accept>>;
    try {
      if (typeof request.body !== 'string') {
        throw new BucketEventError('the event must be sent as application/json');
      }
      counts = await webhooks.accept(
        request.params.source,
        request.headers.authorization,
        request.body,
      );
    } catch (error) {
      if (error instanceof WebhookAuthError) throw new HttpError(401, error.message, CHALLENGE);
      if (error instanceof BucketEventError) throw new HttpError(400, error.message);
      if (error instanceof SourceKeyError || error instanceof BalanceSpentError) {
        throw new HttpError(
          503,
          `${error.message}: send the event again later`,
          { 'retry-after': '60' },
          error,
        );
      }
      throw error;
    }
    return counts;
  });
}
