import { AccountService } from './accounts/account-service.js';
import { ConsoleAccess } from './accounts/console-access.js';
import { createRequestLimits } from './accounts/request-limits.js';
import { TokenList } from './accounts/token-list.js';
import { ExpiredTokenPurge } from './accounts/token-purge.js';
import { BucketFrontDoor } from './buckets/bucket-setup.js';
import { callbackDispatcher } from './callback-setup.js';
import type { Config } from './config.js';
import {
  clamdInDataDir,
  createClamdClient,
  engineVersions,
  signatureVersions,
  startClamd,
} from './engine-setup.js';
import { type ClamdClient, parseClamdAddress } from './engines/clamav/clamd-client.js';
import { clamdDatabasesVersion, refusedDatabases } from './engines/clamav/clamd-databases.js';
import type { DataDirClamd } from './engines/clamav/data-dir-clamd.js';
import { ownSignaturesVersion } from './engines/clamav/signatures.js';
import { ContentTypeDetector } from './engines/content-type.js';
import type { ContentEngine } from './engines/engine.js';
import { nsfwEngines } from './engines/nsfw-engines.js';
import { buildApp, closeApp } from './http/app.js';
import { listenError } from './http/listen-port.js';
import { MULTIPART_OVERHEAD } from './http/multipart-submission.js';
import { startIcap } from './icap/start-icap.js';
import { jobRunnerOptions } from './job-setup.js';
import { createLogger } from './logger.js';
import { ServiceMetrics } from './metrics/service-metrics.js';
import { AddressPolicy } from './outbound/address-policy.js';
import { packageVersion } from './paths.js';
import { AccountActivity } from './processing/account-activity.js';
import { CallbackBrowser } from './processing/callback-browser.js';
import { FileBrowser } from './processing/file-browser.js';
import { Intake } from './processing/intake.js';
import { JobRunner } from './processing/job-runner.js';
import { NodeHeartbeat } from './processing/node-heartbeat.js';
import { OperationsReport } from './processing/operations-report.js';
import { ContentProcessor } from './processing/process-content.js';
import { QueueStatus } from './processing/queue-status.js';
import { Readiness } from './processing/readiness.js';
import { RemoteScans } from './processing/remote-content.js';
import { ResultRecorder } from './processing/result-recorder.js';
import { ResultRetention } from './processing/result-retention.js';
import { ContentScanner } from './processing/scan-content.js';
import { SpoolQuota } from './processing/spool-quota.js';
import { SpoolSweeper } from './processing/spool-sweeper.js';
import { SyncScanLimit } from './processing/sync-scan-limit.js';
import { type EngineVersions, VerdictCache } from './processing/verdict-cache.js';
import { openDispatch } from './queue/open-dispatch.js';
import type { RunningService, ServiceTestHooks } from './service-types.js';
import type { ContentSpool } from './spool/content-spool.js';
import { openSpool } from './spool/open-spool.js';
import { openStore } from './store/open-store.js';

/** A callback attempt cut short by shutdown is due again after its lease: at least once. */
const CALLBACK_GRACE_MS = 2_000;
/** After jobs and callbacks stopped: what pg-boss still runs is failed and delivered elsewhere. */
const DISPATCH_STOP_GRACE_MS = 1_000;

export type { RunningService, ServiceTestHooks } from './service-types.js';

/**
 * Opens the store, starts (or connects to) clamd, and serves until stop(): the API (role `api`),
 * the async jobs and callbacks with only /health over HTTP (role `worker`), or both (`all`).
 */
export async function startService(
  config: Config,
  logger = createLogger(config),
  testHooks: ServiceTestHooks = {},
): Promise<RunningService> {
  const openedStore = await openStore(
    config,
    (error) => logger.warn({ err: error }, 'database connection lost'),
    (message) =>
      logger.warn(
        { reason: message },
        'SQLite checkpoint failed; the connection checkpoints itself',
      ),
  );
  // On PostgreSQL, jobs and callbacks are dispatched through pg-boss: the store announces each
  // one that becomes due in the transaction that made it due.
  const dispatch = await openDispatch(config, logger.child({ component: 'dispatch' }));
  const store = dispatch === null ? openedStore : openedStore.dispatchingTo(dispatch);
  // Requests authenticate against credentials reused for ASSAY_CREDENTIAL_CACHE_MS (the hot path
  // reads no key or account row for most requests); changes from elsewhere take effect within it.
  const accounts = new AccountService(store, config.credentialCacheMs);
  if (config.bootstrapCredentials !== null) {
    const { keyId, secret } = config.bootstrapCredentials;
    const outcome = await accounts.ensureBootstrapKey(keyId, secret);
    logger.info({ key: keyId, outcome }, 'bootstrap credentials');
  }
  let managedClamd: DataDirClamd | null = null;
  let clamd: ClamdClient | null = null;
  let detector: ContentTypeDetector | null = null;
  const engines: ContentEngine[] = nsfwEngines(config.nsfw, logger.child({ component: 'nsfw' }));
  const consoleAccess = new ConsoleAccess(store, config.console, testHooks.consoleClock);
  const tokenPurge = new ExpiredTokenPurge(
    store,
    logger.child({ component: 'tokens' }),
    consoleAccess,
  );
  // Other processes may share the store (PostgreSQL, or --processes): their limits must be the
  // same buckets.
  const sharedByProcesses = config.databaseUrl !== '' || config.processes > 1;
  const requestLimits = createRequestLimits(
    store,
    config.authFailureLimit,
    sharedByProcesses,
    logger.child({ component: 'limits' }),
  );
  let spoolSweeper: SpoolSweeper | null = null;
  let retention: ResultRetention | null = null;
  let spool: ContentSpool | null = null;
  let heartbeat: NodeHeartbeat | null = null;
  const buckets = new BucketFrontDoor(
    store,
    { ...config.buckets, leaseMs: config.jobLeaseMs },
    logger.child({ component: 'buckets' }),
    {
      verdictsIntervalMs: testHooks.bucketVerdictsIntervalMs,
      rescansIntervalMs: testHooks.bucketRescansIntervalMs,
    },
  );
  // Each part is released even when another fails (a process must not hang at exit on an open
  // pool because something before it threw); the first failure is thrown at the end.
  const release = async () => {
    const steps: Array<[string, () => unknown]> = [
      ['heartbeat', () => heartbeat?.stop()],
      ['request limits', () => requestLimits.stop()],
      ['token purge', () => tokenPurge.stop()],
      ['spool sweeper', () => spoolSweeper?.stop()],
      ['result retention', () => retention?.stop()],
      ['buckets', () => buckets.stop()],
      ['engines', () => Promise.all(engines.map((engine) => engine.close()))],
      ['type detector', () => detector?.close()],
      ['clamd client', () => clamd?.close()],
      ['managed clamd', () => managedClamd?.stop()],
      ['spool', () => spool?.close()],
      ['dispatch', () => dispatch?.stop(DISPATCH_STOP_GRACE_MS)],
      ['store', () => store.close()],
    ];
    let failure: unknown = null;
    for (const [part, stop] of steps) {
      try {
        await stop();
      } catch (error) {
        logger.error({ err: error, part }, 'could not stop a part of the service');
        failure ??= error;
      }
    }
    if (failure !== null) throw failure;
  };
  try {
    await dispatch?.start();
    await tokenPurge.start();
    await requestLimits.start();
    // A load of the managed clamd's databases is seen at once here (other processes: within
    // ASSAY_ENGINE_VERSIONS_MAX_AGE_MS).
    let versions: EngineVersions | null = null;
    managedClamd = await startClamd(config, logger, () => versions?.changed());
    if (!clamdInDataDir(config) && config.signaturesDir !== '') {
      logger.warn(
        { signaturesDir: config.signaturesDir },
        "ASSAY_SIGNATURES_DIR is loaded by the managed clamd only: put these files in your clamd's DatabaseDirectory",
      );
    }
    const clamdAddress =
      managedClamd?.address ??
      parseClamdAddress(config.clamd.mode === 'external' ? config.clamd.address : '');
    clamd = await createClamdClient(config, clamdAddress, logger, testHooks.clamdIdleTimeoutMs);
    const databasesVersion = clamdDatabasesVersion(
      clamdAddress,
      config.clamdDatabaseDir,
      config.clamdSelfCheckMs,
    );
    versions = engineVersions(config, clamd, databasesVersion, engines, store);
    detector = await ContentTypeDetector.create(
      (message) => logger.warn(message),
      testHooks.detector,
    );
    const metrics = new ServiceMetrics(logger.child({ component: 'metrics' }), {
      role: config.role,
      version: packageVersion(),
      engines: ['clamav', 'content-type', ...engines.map((engine) => engine.name)],
    });
    const verdictCache = new VerdictCache(
      store,
      versions,
      { mode: config.verdictCache, ttlMs: config.verdictCacheTtlMs },
      logger.child({ component: 'verdict-cache' }),
    );
    const scanner = new ContentScanner(clamd, detector, engines, {
      findingsStyle: config.findingsStyle,
      unexamined: config.unexamined,
      cache: verdictCache,
      signatureVersions: () => signatureVersions(versions),
      events: metrics,
    });
    spool = await openSpool(config);
    await spool.init();
    logger.info({ spool: spool.describe }, 'spool ready');
    const policy = AddressPolicy.fromSetting(config.fetchAllow);
    const userAgent = `Assay/${packageVersion()} (content processing service)`;
    const outbound = {
      fetch: {
        policy,
        userAgent,
        resolve: testHooks.resolve,
        connectTimeoutMs: 10_000,
        totalTimeoutMs: config.fetchTimeoutMs,
        idleTimeoutMs: config.fetchIdleTimeoutMs,
        maxBytes: config.maxFileSize,
      },
    };
    const callbacks = callbackDispatcher(config, store, {
      outbound: { policy, userAgent, resolve: testHooks.resolve },
      events: metrics,
      sharedByProcesses,
      logger: logger.child({ component: 'callbacks' }),
      dispatch,
    });
    const recorder = new ResultRecorder(
      store,
      () => callbacks.notify(),
      metrics,
      (error, results) =>
        logger.warn(
          { err: error, results },
          'a group commit of results failed; its results are written one by one',
        ),
    );
    const processor = new ContentProcessor(
      store,
      scanner,
      recorder,
      config.maxFileSize,
      logger.child({ component: 'processing' }),
    );
    const jobs = new JobRunner(
      store,
      spool,
      processor,
      jobRunnerOptions(config, {
        fetch: outbound.fetch,
        verdictsToClaim: () => verdictCache.toClaim(),
        objects: buckets.objects,
      }),
      logger.child({ component: 'jobs' }),
      dispatch ?? undefined,
    );
    // Only a process that runs jobs reports the queue; an api process accepts work for others.
    const runsJobs = config.role !== 'api';
    const queueStatus = new QueueStatus(store, jobs);
    const spoolQuota = new SpoolQuota(store.jobs, {
      totalBytes: config.spoolMaxBytes,
      accountBytes: config.accountSpoolMaxBytes,
    });
    const ownSignatures = ownSignaturesVersion();
    const clamdClient = clamd;
    metrics.watch({
      queue: () => queueStatus.backlog(),
      jobsRunning: () => queueStatus.running,
      dispatch: dispatch === null ? null : () => dispatch.queueStats(),
      spool: { usage: () => spoolQuota.usage(), limits: spoolQuota.limits },
      clamd: () => clamdClient.version(),
      databasesVersion,
      ownSignaturesVersion: () => ownSignatures,
    });
    const engine = clamd;
    // Every process says what it runs and what its clamd loaded, for the operations page.
    heartbeat = new NodeHeartbeat(
      store,
      {
        role: config.role,
        version: packageVersion(),
        ownSignaturesVersion: ownSignaturesVersion(),
      },
      {
        clamd: (signal) => engine.version(signal),
        databasesVersion,
        runningJobs: () => (runsJobs ? jobs.running : null),
      },
      logger.child({ component: 'heartbeat' }),
    );
    const intake = new Intake(spool, spoolQuota, jobs, config.asyncInlineBytes);
    const bucketWebhooks = buckets.connect({
      principals: accounts,
      intake,
      signatureParts: () => versions?.changing() ?? Promise.resolve(null),
      metrics: metrics.buckets(),
    });
    const app = await buildApp(
      {
        config,
        accounts,
        requestLimits,
        processor,
        intake,
        remoteScans: new RemoteScans(processor, spool, outbound.fetch),
        readiness: new Readiness(
          store,
          clamd,
          spool,
          Math.max(config.maxFileSize, config.legacyMaxPostSize) + MULTIPART_OVERHEAD,
          runsJobs ? queueStatus : null,
          databasesVersion,
          refusedDatabases(clamdAddress),
        ),
        outbound,
        syncScans: new SyncScanLimit(config.syncConcurrency, config.accountSyncConcurrency),
        console: consoleAccess,
        activity: new AccountActivity(store),
        operations: new OperationsReport(store, heartbeat.id),
        metrics,
        files: new FileBrowser(store, processor),
        callbacks: new CallbackBrowser(store, () => callbacks.notify()),
        tokens: new TokenList(store, accounts),
        bucketWebhooks,
      },
      logger,
      { healthOnly: config.role === 'worker' },
    );
    const url = await app
      .listen({ host: config.host, port: config.port })
      .catch((error: unknown) => {
        throw listenError(error, config.host, config.port);
      });
    // The ICAP front door serves where the API does.
    const icap = await startIcap(config, {
      accounts,
      requestLimits,
      syncScans: app.services.syncScans,
      processor,
      metrics,
      signatureParts: () => versions?.changing() ?? Promise.resolve(null),
      logger: logger.child({ component: 'icap' }),
    }).catch(async (error: unknown) => {
      await closeApp(app);
      throw error;
    });
    if (runsJobs) {
      await jobs.start();
      spoolSweeper = new SpoolSweeper(store, spool, logger.child({ component: 'spool' }));
      await spoolSweeper.start();
      retention = new ResultRetention(
        store,
        { ...config.resultRetention, icapKeys: new Set(config.icap.services.values()) },
        logger.child({ component: 'retention' }),
        testHooks.resultRetentionIntervalMs,
      );
      await retention.start();
      await buckets.start();
      await callbacks.start();
    }
    await heartbeat.start();
    let stopped: Promise<void> | null = null;
    return {
      url,
      managedClamd,
      routes: app.registeredRoutes,
      icap: icap?.urls ?? { icap: null, icaps: null },
      stop() {
        // Idempotent: a signal and a caller may both ask. No new requests first, then let
        // running jobs finish (or park them for the next start), then the engines go.
        // What fails is logged and the rest still stops: the parts are released in any case.
        const step = (part: string, work: () => Promise<unknown>) =>
          work().catch((error: unknown) => {
            logger.error({ err: error, part }, 'could not stop a part of the service');
          });
        stopped ??= Promise.all([
          step('http', () => closeApp(app)),
          step('icap', async () => icap?.stop()),
        ])
          .then(() => step('jobs', () => jobs.stop(config.shutdownGraceMs)))
          .then(() => step('callbacks', () => callbacks.stop(CALLBACK_GRACE_MS)))
          .then(release);
        return stopped;
      },
    };
  } catch (error) {
    await release();
    throw error;
  }
}
