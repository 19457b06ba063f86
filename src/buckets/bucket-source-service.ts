import { createHash, randomBytes } from 'node:crypto';
import { newId } from '../accounts/credentials.js';
import type { BucketSource, ThreatAction } from '../domain/records.js';
import type { BucketSourceChanges } from '../store/bucket-sources.js';
import type { Store } from '../store/store.js';

/** A source's settings refused, with the reason in the operator's words. */
export class BucketSourceError extends Error {
  override readonly name = 'BucketSourceError';
}

/** What an operator gives for a watched bucket (`assay admin bucket add`). */
export interface BucketSourceInput {
  name: string;
  keyId: string;
  bucket: string;
  endpoint?: string;
  region?: string;
  prefix?: string;
  credentials?: string;
  queueUrl?: string | null;
  /** A webhook with a new token (printed once; only its hash is kept). */
  webhook?: boolean;
  onThreat?: ThreatAction;
  quarantine?: string | null;
  callback?: string | null;
  rescanWindow?: number | null;
}

export type BucketSourceUpdate = Partial<Omit<BucketSourceInput, 'name' | 'bucket' | 'webhook'>> & {
  /** true: a new token (the old one stops working); false: no webhook. */
  webhook?: boolean;
};

const NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const CREDENTIALS = /^(default|env:[A-Z][A-Z0-9_]{0,63})$/;
const THREAT_ACTIONS: readonly ThreatAction[] = ['tag', 'quarantine', 'delete'];

/** SHA-256 of a webhook token, as the store keeps it. */
export function webhookTokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * Watched buckets: added, changed and removed by the operator, each checked whole (its key
 * active, its names as S3 takes them, a quarantine where a threat is to be quarantined), and a
 * full listing requested. A webhook's token is returned once and kept only as a hash.
 */
export class BucketSourceService {
  constructor(private readonly store: Store) {}

  async add(
    input: BucketSourceInput,
  ): Promise<{ source: BucketSource; webhookToken: string | null }> {
    if (!NAME.test(input.name)) {
      throw new BucketSourceError(
        'the name takes lower-case letters, digits, - and _, 64 at most, starting with a letter or digit',
      );
    }
    if (!BUCKET.test(input.bucket))
      throw new BucketSourceError(`"${input.bucket}" is not an S3 bucket name`);
    if ((await this.store.bucketSources.findByName(input.name)) !== null) {
      throw new BucketSourceError(`a bucket source named ${input.name} exists already`);
    }
    const key = await this.activeKey(input.keyId);
    const webhookToken = input.webhook === true ? newWebhookToken() : null;
    const source: BucketSource = {
      id: newId(),
      name: input.name,
      accountId: key.accountId,
      apiKeyId: key.id,
      endpoint: endpointOf(input.endpoint ?? ''),
      region: regionOf(input.region ?? 'us-east-1'),
      bucket: input.bucket,
      prefix: input.prefix ?? '',
      credentials: credentialsOf(input.credentials ?? 'default'),
      queueUrl: queueUrlOf(input.queueUrl ?? null),
      webhookTokenHash: webhookToken === null ? null : webhookTokenHash(webhookToken),
      onThreat: input.onThreat ?? 'tag',
      quarantine: quarantineOf(input.quarantine ?? null),
      callback: callbackOf(input.callback ?? null),
      rescanWindow: input.rescanWindow ?? null,
      listing: { state: 'idle', after: null, count: 0, started: null, finished: null },
      creationDate: new Date().toISOString(),
    };
    checkThreatAction(source.onThreat, source.quarantine, source.bucket, source.prefix);
    await this.store.bucketSources.insert(source);
    return { source, webhookToken };
  }

  async update(
    name: string,
    update: BucketSourceUpdate,
  ): Promise<{ source: BucketSource; webhookToken: string | null }> {
    const current = await this.named(name);
    const changes: BucketSourceChanges = {};
    if (update.keyId !== undefined) {
      const key = await this.activeKey(update.keyId);
      changes.apiKeyId = key.id;
      changes.accountId = key.accountId;
    }
    if (update.endpoint !== undefined) changes.endpoint = endpointOf(update.endpoint);
    if (update.region !== undefined) changes.region = regionOf(update.region);
    if (update.prefix !== undefined) changes.prefix = update.prefix;
    if (update.credentials !== undefined) changes.credentials = credentialsOf(update.credentials);
    if (update.queueUrl !== undefined) changes.queueUrl = queueUrlOf(update.queueUrl);
    if (update.onThreat !== undefined) changes.onThreat = update.onThreat;
    if (update.quarantine !== undefined) changes.quarantine = quarantineOf(update.quarantine);
    if (update.callback !== undefined) changes.callback = callbackOf(update.callback);
    if (update.rescanWindow !== undefined) changes.rescanWindow = update.rescanWindow;
    let webhookToken: string | null = null;
    if (update.webhook === true) {
      webhookToken = newWebhookToken();
      changes.webhookTokenHash = webhookTokenHash(webhookToken);
    } else if (update.webhook === false) {
      changes.webhookTokenHash = null;
    }
    const next = { ...current, ...changes };
    checkThreatAction(next.onThreat, next.quarantine, next.bucket, next.prefix);
    await this.store.bucketSources.update(current.id, changes);
    return { source: await this.named(name), webhookToken };
  }

  async remove(name: string): Promise<void> {
    const source = await this.named(name);
    await this.store.transaction((store) => store.bucketSources.remove(source.id));
  }

  /** Every source with its objects by status. */
  async list(): Promise<Array<{ source: BucketSource; objects: Record<string, number> }>> {
    const sources = await this.store.bucketSources.list();
    return Promise.all(
      sources.map(async (source) => ({
        source,
        objects: await this.store.bucketObjects.countsByStatus(source.id),
      })),
    );
  }

  /** One source with its objects by status. */
  async status(name: string): Promise<{ source: BucketSource; objects: Record<string, number> }> {
    const source = await this.named(name);
    return { source, objects: await this.store.bucketObjects.countsByStatus(source.id) };
  }

  /** A full listing of the source from its first key (a running one starts over). */
  async requestListing(name: string): Promise<BucketSource> {
    const source = await this.named(name);
    await this.store.bucketSources.requestListing(source.id);
    return this.named(name);
  }

  async named(name: string): Promise<BucketSource> {
    const source = await this.store.bucketSources.findByName(name);
    if (source === null) throw new BucketSourceError(`no bucket source is named ${name}`);
    return source;
  }

  private async activeKey(keyId: string) {
    const key = await this.store.apiKeys.find(keyId);
    if (key === null) throw new BucketSourceError(`no API key has the id ${keyId}`);
    if (!key.active) throw new BucketSourceError(`the API key ${keyId} is disabled`);
    return key;
  }
}

function newWebhookToken(): string {
  return randomBytes(24).toString('base64url');
}

function endpointOf(endpoint: string): string {
  if (endpoint === '') return '';
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new BucketSourceError(`the endpoint "${endpoint}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new BucketSourceError('the endpoint must be an http:// or https:// URL');
  }
  return url.origin;
}

function regionOf(region: string): string {
  if (!/^[a-z0-9-]{1,64}$/.test(region)) throw new BucketSourceError(`"${region}" is not a region`);
  return region;
}

function credentialsOf(credentials: string): string {
  if (!CREDENTIALS.test(credentials)) {
    throw new BucketSourceError(
      'credentials are `default` (the AWS SDK chain) or `env:NAME` (NAME_ACCESS_KEY_ID and NAME_SECRET_ACCESS_KEY in the environment)',
    );
  }
  return credentials;
}

function queueUrlOf(queueUrl: string | null): string | null {
  if (queueUrl === null || queueUrl === '') return null;
  try {
    const url = new URL(queueUrl);
    if (url.protocol === 'https:' || url.protocol === 'http:') return url.href;
  } catch {
    // refused below
  }
  throw new BucketSourceError(`the queue URL "${queueUrl}" is not an http:// or https:// URL`);
}

function quarantineOf(quarantine: string | null): string | null {
  if (quarantine === null || quarantine === '') return null;
  const [bucket = ''] = quarantine.split('/', 1);
  if (!BUCKET.test(bucket)) {
    throw new BucketSourceError(
      'the quarantine is `bucket` or `bucket/prefix`, with a valid bucket name',
    );
  }
  return quarantine.replace(/\/+$/, '');
}

function callbackOf(callback: string | null): string | null {
  if (callback === null || callback === '') return null;
  try {
    const url = new URL(callback);
    if (url.protocol === 'https:' || url.protocol === 'http:') return url.href;
  } catch {
    // refused below
  }
  throw new BucketSourceError(`the callback "${callback}" is not an http:// or https:// URL`);
}

function checkThreatAction(
  action: ThreatAction,
  quarantine: string | null,
  bucket: string,
  prefix: string,
): void {
  if (!THREAT_ACTIONS.includes(action)) {
    throw new BucketSourceError(`--on-threat takes ${THREAT_ACTIONS.join(', ')}`);
  }
  if (action === 'quarantine' && quarantine === null) {
    throw new BucketSourceError('--on-threat quarantine needs --quarantine bucket[/prefix]');
  }
  if (quarantine === null) return;
  // A quarantine inside the watched prefix would announce every moved object again.
  const [qBucket, ...rest] = quarantine.split('/');
  const qPrefix = rest.join('/');
  if (qBucket === bucket && (prefix === '' || `${qPrefix}/`.startsWith(`${prefix}`))) {
    throw new BucketSourceError('the quarantine must not be inside the watched bucket and prefix');
  }
}
