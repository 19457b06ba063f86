import type { Kysely, Selectable, Updateable } from 'kysely';
import type { BucketListing, BucketSource, ThreatAction } from '../domain/records.js';
import type { BucketSourcesTable, Database } from './schema.js';

function toSource(row: Selectable<BucketSourcesTable>): BucketSource {
  return {
    id: row.id,
    name: row.name,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    endpoint: row.endpoint,
    region: row.region,
    bucket: row.bucket,
    prefix: row.prefix,
    credentials: row.credentials,
    queueUrl: row.queue_url,
    webhookTokenHash: row.webhook_token_hash,
    onThreat: row.on_threat as ThreatAction,
    quarantine: row.quarantine,
    callback: row.callback,
    rescanWindow: row.rescan_window === null ? null : Number(row.rescan_window),
    listing: {
      state: row.listing as BucketListing['state'],
      after: row.list_after,
      count: Number(row.list_count),
      started: row.list_started,
      finished: row.list_finished,
    },
    creationDate: row.creation_date,
  };
}

/** What `admin bucket update` may change. */
export type BucketSourceChanges = Partial<
  Pick<
    BucketSource,
    | 'apiKeyId'
    | 'accountId'
    | 'endpoint'
    | 'region'
    | 'prefix'
    | 'credentials'
    | 'queueUrl'
    | 'webhookTokenHash'
    | 'onThreat'
    | 'quarantine'
    | 'callback'
    | 'rescanWindow'
  >
>;

/** Watched buckets, and each one's listing: requested, leased by one process, checkpointed. */
export class BucketSourceRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(source: BucketSource): Promise<void> {
    await this.db
      .insertInto('bucket_sources')
      .values({
        id: source.id,
        name: source.name,
        account_id: source.accountId,
        api_key_id: source.apiKeyId,
        endpoint: source.endpoint,
        region: source.region,
        bucket: source.bucket,
        prefix: source.prefix,
        credentials: source.credentials,
        queue_url: source.queueUrl,
        webhook_token_hash: source.webhookTokenHash,
        on_threat: source.onThreat,
        quarantine: source.quarantine,
        callback: source.callback,
        rescan_window: source.rescanWindow,
        creation_date: source.creationDate,
      })
      .execute();
  }

  async find(id: string): Promise<BucketSource | null> {
    const row = await this.db
      .selectFrom('bucket_sources')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row === undefined ? null : toSource(row);
  }

  async findByName(name: string): Promise<BucketSource | null> {
    const row = await this.db
      .selectFrom('bucket_sources')
      .selectAll()
      .where('name', '=', name)
      .executeTakeFirst();
    return row === undefined ? null : toSource(row);
  }

  /** Whether any source exists: one indexed read of at most one row. */
  async any(): Promise<boolean> {
    const row = await this.db.selectFrom('bucket_sources').select('id').limit(1).executeTakeFirst();
    return row !== undefined;
  }

  async list(): Promise<BucketSource[]> {
    const rows = await this.db.selectFrom('bucket_sources').selectAll().orderBy('name').execute();
    return rows.map(toSource);
  }

  async update(id: string, changes: BucketSourceChanges): Promise<boolean> {
    const set: Updateable<BucketSourcesTable> = {};
    if (changes.apiKeyId !== undefined) set.api_key_id = changes.apiKeyId;
    if (changes.accountId !== undefined) set.account_id = changes.accountId;
    if (changes.endpoint !== undefined) set.endpoint = changes.endpoint;
    if (changes.region !== undefined) set.region = changes.region;
    if (changes.prefix !== undefined) set.prefix = changes.prefix;
    if (changes.credentials !== undefined) set.credentials = changes.credentials;
    if (changes.queueUrl !== undefined) set.queue_url = changes.queueUrl;
    if (changes.webhookTokenHash !== undefined) set.webhook_token_hash = changes.webhookTokenHash;
    if (changes.onThreat !== undefined) set.on_threat = changes.onThreat;
    if (changes.quarantine !== undefined) set.quarantine = changes.quarantine;
    if (changes.callback !== undefined) set.callback = changes.callback;
    if (changes.rescanWindow !== undefined) set.rescan_window = changes.rescanWindow;
    if (Object.keys(set).length === 0) return (await this.find(id)) !== null;
    const result = await this.db
      .updateTable('bucket_sources')
      .set(set)
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** The source and what is known of its objects (their results stay, as any result does). */
  async remove(id: string): Promise<boolean> {
    await this.db.deleteFrom('bucket_objects').where('source_id', '=', id).execute();
    const result = await this.db
      .deleteFrom('bucket_sources')
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Asks for a full listing from the start (a running one starts over once its lease ends). */
  async requestListing(id: string): Promise<boolean> {
    const result = await this.db
      .updateTable('bucket_sources')
      .set({
        listing: 'requested',
        list_after: null,
        list_count: 0,
        list_started: null,
        list_finished: null,
        list_lease_until: 0,
      })
      .where('id', '=', id)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Takes the listing of a source whose listing is requested, or running under a lease that ended
   * (its process died): one process lists a source at a time, from its checkpoint. Null: none.
   */
  async claimListing(nowMs: number, leaseMs: number): Promise<BucketSource | null> {
    const candidates = await this.db
      .selectFrom('bucket_sources')
      .select('id')
      .where((eb) =>
        eb.or([
          eb('listing', '=', 'requested'),
          eb.and([eb('listing', '=', 'running'), eb('list_lease_until', '<', nowMs)]),
        ]),
      )
      .orderBy('name')
      .execute();
    for (const { id } of candidates) {
      const taken = await this.db
        .updateTable('bucket_sources')
        .set({ listing: 'running', list_lease_until: nowMs + leaseMs })
        .where('id', '=', id)
        .where((eb) =>
          eb.or([
            eb('listing', '=', 'requested'),
            eb.and([eb('listing', '=', 'running'), eb('list_lease_until', '<', nowMs)]),
          ]),
        )
        .executeTakeFirst();
      if (Number(taken.numUpdatedRows) > 0) {
        await this.db
          .updateTable('bucket_sources')
          .set({ list_started: new Date(nowMs).toISOString() })
          .where('id', '=', id)
          .where('list_started', 'is', null)
          .execute();
        return this.find(id);
      }
    }
    return null;
  }

  /**
   * Moves the listing's checkpoint past a page (in the transaction that announced the page's
   * objects) and extends its lease; false when the lease was lost (another process lists now).
   */
  async checkpointListing(
    id: string,
    after: string | null,
    listed: number,
    nowMs: number,
    leaseMs: number,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('bucket_sources')
      .set((eb) => ({
        list_after: after,
        list_count: eb('list_count', '+', listed),
        list_lease_until: nowMs + leaseMs,
      }))
      .where('id', '=', id)
      .where('listing', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /** Extends a running listing's lease (it waits for its backlog); false when it was lost. */
  async extendListing(id: string, nowMs: number, leaseMs: number): Promise<boolean> {
    const result = await this.db
      .updateTable('bucket_sources')
      .set({ list_lease_until: nowMs + leaseMs })
      .where('id', '=', id)
      .where('listing', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async finishListing(id: string, now: string): Promise<void> {
    await this.db
      .updateTable('bucket_sources')
      .set({ listing: 'idle', list_finished: now, list_lease_until: 0 })
      .where('id', '=', id)
      .where('listing', '=', 'running')
      .execute();
  }
}
