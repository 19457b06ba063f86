import type { BucketSource } from '../domain/records.js';
import type { Store } from '../store/store.js';
import { BucketClient, type BucketClientOptions } from './bucket-client.js';

/** How long a source read from the store is used before it is read again. */
const SOURCE_TTL_MS = 5_000;

/**
 * Each watched bucket's client, made once and made again when the source's connection settings
 * change (an operator's `admin bucket update` reaches every process within a few seconds). Sources
 * are read from the store at most every 5 s per name.
 */
export class BucketClients {
  private readonly clients = new Map<string, { fingerprint: string; client: BucketClient }>();
  private readonly sources = new Map<string, { source: BucketSource; readAt: number }>();

  constructor(
    private readonly store: Store,
    private readonly options: BucketClientOptions,
  ) {}

  /**
   * The source named `name` as recently read; null when there is none. Only sources that exist
   * are kept: the webhook's unauthenticated callers name anything, and must not grow the map.
   */
  async source(name: string): Promise<BucketSource | null> {
    const cached = this.sources.get(name);
    if (cached !== undefined && Date.now() - cached.readAt < SOURCE_TTL_MS) return cached.source;
    const source = await this.store.bucketSources.findByName(name);
    if (source === null) this.sources.delete(name);
    else this.sources.set(name, { source, readAt: Date.now() });
    return source;
  }

  /** The client of `source` (its credentials read now when they are new). */
  client(source: BucketSource): BucketClient {
    const fingerprint = [
      source.endpoint,
      source.region,
      source.bucket,
      source.prefix,
      source.credentials,
    ].join('\n');
    const known = this.clients.get(source.id);
    if (known?.fingerprint === fingerprint) return known.client;
    known?.client.close();
    const client = new BucketClient(source, this.options);
    this.clients.set(source.id, { fingerprint, client });
    return client;
  }

  close(): void {
    for (const { client } of this.clients.values()) client.close();
    this.clients.clear();
  }
}
