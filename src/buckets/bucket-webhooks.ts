import { createHash, timingSafeEqual } from 'node:crypto';
import type { BucketClients } from './bucket-clients.js';
import { parseBucketEvent } from './bucket-events.js';
import type { Announced, BucketIntake } from './bucket-intake.js';

/** No source by that name takes webhook events with that token (which of the two is not said). */
export class WebhookAuthError extends Error {
  override readonly name = 'WebhookAuthError';
}

/**
 * MinIO-style webhook events (`POST /bucket-events/<source>` with `Authorization: Bearer <token>`):
 * the token checked against the source's hash in constant time, the body parsed as untrusted
 * bytes (BucketEventError with the reason), each object announced. A failure to queue (the store,
 * the key's balance) is thrown as it is: the sender retries, and announcing again queues nothing
 * twice.
 */
export class BucketWebhooks {
  constructor(
    private readonly clients: BucketClients,
    private readonly intake: BucketIntake,
  ) {}

  async accept(
    sourceName: string,
    authorization: string | undefined,
    body: string,
  ): Promise<Record<Announced, number>> {
    const source = await this.clients.source(sourceName);
    const token = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
    const expected = Buffer.from(source?.webhookTokenHash ?? '0'.repeat(64), 'hex');
    const given = createHash('sha256')
      .update(token ?? '')
      .digest();
    // Compared even when there is no such source: the answer's time says nothing of its name.
    const matches = timingSafeEqual(given, expected);
    if (source === null || source.webhookTokenHash === null || token === undefined || !matches) {
      throw new WebhookAuthError(
        'bucket events need the bearer token of their source (assay admin bucket update --webhook)',
      );
    }
    const event = parseBucketEvent(body);
    const counts: Record<Announced, number> = { queued: 0, 'in-flight': 0, known: 0, outside: 0 };
    if (event.kind === 'test') return counts;
    for (const object of event.objects) {
      counts[await this.intake.announce(source, object, 'event')]++;
    }
    return counts;
  }
}
