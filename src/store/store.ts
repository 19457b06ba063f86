import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import { AccountRepository } from './accounts.js';
import { ApiKeyRepository } from './api-keys.js';
import { BucketObjectRepository } from './bucket-objects.js';
import { BucketSourceRepository } from './bucket-sources.js';
import { CallbackLaneRepository } from './callback-lanes.js';
import { CallbackOutbox } from './callback-outbox.js';
import { CallbackReports } from './callback-reports.js';
import { ConsoleSessionRepository } from './console-sessions.js';
import { EngineVersionRepository } from './engine-versions.js';
import { FileRepository } from './files.js';
import { JobRepository } from './jobs.js';
import * as initial from './migrations/0001-initial.js';
import * as jobsTraceCallbacks from './migrations/0002-jobs-trace-callbacks.js';
import * as tokensUsers from './migrations/0003-tokens-users.js';
import * as keyRateLimits from './migrations/0004-key-rate-limits.js';
import * as legacyApi from './migrations/0005-legacy-api.js';
import * as callbackDestinations from './migrations/0006-callback-destinations.js';
import * as jobLeases from './migrations/0007-job-leases.js';
import * as jobSize from './migrations/0008-job-size.js';
import * as accountActive from './migrations/0009-account-active.js';
import * as jobCredit from './migrations/0010-job-credit.js';
import * as jobStages from './migrations/0011-job-stages.js';
import * as traceOrder from './migrations/0012-trace-order.js';
import * as rateBuckets from './migrations/0013-rate-buckets.js';
import * as spoolKey from './migrations/0014-spool-key.js';
import * as verdictKey from './migrations/0015-verdict-key.js';
import * as consoleUsers from './migrations/0016-console.js';
import * as operations from './migrations/0017-operations.js';
import * as consolePages from './migrations/0018-console-pages.js';
import * as jobContent from './migrations/0019-job-content.js';
import * as callbackLanes from './migrations/0020-callback-lanes.js';
import * as jobContents from './migrations/0021-job-contents.js';
import * as verdictKeyContent from './migrations/0022-verdict-key-content.js';
import * as keyAccountRateLimit from './migrations/0023-key-account-rate-limit.js';
import * as fileNames from './migrations/0024-file-names.js';
import * as resultRetention from './migrations/0025-result-retention.js';
import * as bucketSources from './migrations/0026-bucket-sources.js';
import * as inlineTrace from './migrations/0027-inline-trace.js';
import { NodeHeartbeatRepository } from './node-heartbeats.js';
import { RateBucketRepository } from './rate-buckets.js';
import { ResultRepository } from './results.js';
import type { Database } from './schema.js';
import { TokenRepository } from './tokens.js';
import { TraceRepository } from './trace-events.js';
import { UserRepository } from './users.js';
import type { WorkDispatch } from './work-dispatch.js';

/** Migrations are imported, not read from disk, so they work from src/ (tsx) and dist/ alike. */
const migrations: Record<string, Migration> = {
  '0001-initial': initial,
  '0002-jobs-trace-callbacks': jobsTraceCallbacks,
  '0003-tokens-users': tokensUsers,
  '0004-key-rate-limits': keyRateLimits,
  '0005-legacy-api': legacyApi,
  '0006-callback-destinations': callbackDestinations,
  '0007-job-leases': jobLeases,
  '0008-job-size': jobSize,
  '0009-account-active': accountActive,
  '0010-job-credit': jobCredit,
  '0011-job-stages': jobStages,
  '0012-trace-order': traceOrder,
  '0013-rate-buckets': rateBuckets,
  '0014-spool-key': spoolKey,
  '0015-verdict-key': verdictKey,
  '0016-console': consoleUsers,
  '0017-operations': operations,
  '0018-console-pages': consolePages,
  '0019-job-content': jobContent,
  '0020-callback-lanes': callbackLanes,
  '0021-job-contents': jobContents,
  '0022-verdict-key-content': verdictKeyContent,
  '0023-key-account-rate-limit': keyAccountRateLimit,
  '0024-file-names': fileNames,
  '0025-result-retention': resultRetention,
  '0026-bucket-sources': bucketSources,
  '0027-inline-trace': inlineTrace,
};

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return migrations;
  }
}

/** The one door to persistence: repositories over one Kysely instance, whatever the dialect. */
export class Store {
  readonly accounts: AccountRepository;
  readonly apiKeys: ApiKeyRepository;
  readonly files: FileRepository;
  readonly jobs: JobRepository;
  readonly trace: TraceRepository;
  readonly callbacks: CallbackOutbox;
  readonly callbackReports: CallbackReports;
  readonly callbackLanes: CallbackLaneRepository;
  readonly tokens: TokenRepository;
  readonly users: UserRepository;
  readonly consoleSessions: ConsoleSessionRepository;
  readonly rateBuckets: RateBucketRepository;
  readonly engineVersions: EngineVersionRepository;
  readonly nodeHeartbeats: NodeHeartbeatRepository;
  readonly results: ResultRepository;
  readonly bucketSources: BucketSourceRepository;
  readonly bucketObjects: BucketObjectRepository;

  /**
   * @param syncCommitted makes what has been committed durable, for `syncCommits`; by
   * default nothing (a dialect whose commits are durable by themselves).
   * @param dispatch is told of jobs and callbacks that become due, in their transaction.
   */
  constructor(
    readonly db: Kysely<Database>,
    private readonly syncCommitted: () => Promise<void> = async () => {},
    readonly dispatch?: WorkDispatch,
    /** Called before the connection closes (SQLite's checkpointing thread stops). */
    private readonly beforeClose: () => Promise<void> = async () => {},
  ) {
    this.accounts = new AccountRepository(db);
    this.apiKeys = new ApiKeyRepository(db);
    this.files = new FileRepository(db);
    this.jobs = new JobRepository(db, dispatch);
    this.trace = new TraceRepository(db);
    this.callbacks = new CallbackOutbox(db, dispatch);
    this.callbackReports = new CallbackReports(db);
    this.callbackLanes = new CallbackLaneRepository(db);
    this.tokens = new TokenRepository(db);
    this.users = new UserRepository(db);
    this.consoleSessions = new ConsoleSessionRepository(db);
    this.rateBuckets = new RateBucketRepository(db);
    this.engineVersions = new EngineVersionRepository(db);
    this.nodeHeartbeats = new NodeHeartbeatRepository(db);
    this.results = new ResultRepository(db);
    this.bucketSources = new BucketSourceRepository(db);
    this.bucketObjects = new BucketObjectRepository(db);
  }

  /** Runs `work` in one transaction, with repositories bound to it. */
  transaction<T>(work: (store: Store) => Promise<T>): Promise<T> {
    const dispatch = this.dispatch;
    return this.db.transaction().execute((trx) => work(new Store(trx, undefined, dispatch)));
  }

  /** The same database, announcing due work through `dispatch` (pg-boss on PostgreSQL). */
  dispatchingTo(dispatch: WorkDispatch): Store {
    return new Store(this.db, this.syncCommitted, dispatch, this.beforeClose);
  }

  /**
   * Makes every commit so far survive power loss: for commits that answer a promise (the 202 of a
   * job; GroupedCommits syncs once per group). Other commits may trade the last moments before a
   * power cut for speed (SQLite: WAL with synchronous=NORMAL).
   */
  syncCommits(): Promise<void> {
    return this.syncCommitted();
  }

  async migrate(): Promise<void> {
    const migrator = new Migrator({
      db: this.db,
      provider: new StaticMigrationProvider(),
      // 0011 (job stages) was merged after 0012 and 0013: a database those already ran on takes
      // it late. Numbers are reserved per branch, and migrations of one branch touch its tables.
      allowUnorderedMigrations: true,
    });
    const { error, results } = await migrator.migrateToLatest();
    const failed = results?.find((result) => result.status === 'Error');
    if (error !== undefined || failed !== undefined) {
      const name = failed ? ` (${failed.migrationName})` : '';
      throw new Error(`database migration failed${name}: ${String(error)}`);
    }
  }

  /** Readiness probe: a round trip to the database. */
  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async close(): Promise<void> {
    await this.beforeClose();
    await this.db.destroy();
  }
}
