/** What the store hands to the domain: plain records, no SQL types. */

export const DETECTION_CATEGORIES = ['MALWARE', 'NSFW_LANGUAGE', 'NSFW_IMAGE'] as const;
export type DetectionCategory = (typeof DETECTION_CATEGORIES)[number];

export interface Account {
  id: string;
  name: string;
  billingEmail: string;
  subscription: string;
  balance: number;
  startingBalance: number;
  enforceBalance: boolean;
  creationDate: string;
  modificationDate: string;
  /** Signs this account's callbacks (HMAC-SHA256); readable because it must sign. */
  callbackSecret: string;
  /** False: disabled (every key and token gets 401); its data is kept. */
  active: boolean;
}

/** What erasing an account removed (counts), and the spool keys of its jobs' content. */
export interface AccountErasure {
  keys: number;
  tokens: number;
  users: number;
  results: number;
  traceEvents: number;
  jobs: number;
  callbacks: number;
  /** Content spooled for the account's jobs. */
  spoolKeys: string[];
  /**
   * Where its fetches still downloading spool (their ids): removed if there yet; a worker that
   * finishes such a download finds the job gone and removes what it spooled.
   */
  downloadKeys: string[];
}

export interface ApiKey {
  id: string;
  accountId: string;
  secretHash: string;
  active: boolean;
  tags: string[];
  detectionCategories: DetectionCategory[];
  creationDate: string;
  lastSeenDate: string | null;
  /**
   * The operator's limit for the key (`admin key update`); null: the service's default. Either is
   * the key's ceiling.
   */
  rateLimit: KeyRateLimit | null;
  /** The limit the account set itself (the console); only the stricter of it and the ceiling applies. */
  accountRateLimit: KeyRateLimit | null;
  /**
   * Seconds the key's results are kept (`admin key update --result-retention`; 0: for good);
   * null: the service's default for it (ASSAY_RESULT_RETENTION, or for a key an ICAP service acts
   * as, ASSAY_ICAP_RESULT_RETENTION).
   */
  resultRetention?: number | null;
}

export interface KeyRateLimit {
  /** Requests per second; 0 means unlimited. */
  rate: number;
  burst: number;
}

export interface StoredFile {
  id: string;
  accountId: string;
  apiKeyId: string;
  checksum: string | null;
  sha256: string | null;
  contentLength: number | null;
  contentType: string | null;
  /** null only together with `error`: an item without a verdict never reads as clean. */
  findings: string[] | null;
  metadata: Record<string, string>;
  callback: string | null;
  error: string | null;
  creationDate: string;
  /** The name the client gave the file (keptFileName); shown by the console, never by the API. */
  fileName?: string | null;
}

/** `bucket`: an object of a watched bucket, read from S3 like a fetch (issue 42). */
export type JobKind = 'upload' | 'fetch' | 'bucket';

/** What a later item takes from an earlier result with the same verdict key (VerdictCache). */
export interface ReusableVerdict {
  /** The result whose scan gave the verdict. */
  fileId: string;
  receivedAt: string;
  contentType: string;
  findings: string[];
}

/** An earlier result's complete verdict, under its verdict cache key. */
export interface EarlierVerdict extends ReusableVerdict {
  key: string;
}

/**
 * The earlier verdicts of a claimed job's content, found with its claim: `complete` when they are
 * all there are within the cache's time (a claim brings a bounded number).
 */
export interface ClaimedVerdicts {
  verdicts: EarlierVerdict[];
  complete: boolean;
}

/** Work accepted with a 202 and not finished: its result does not exist yet. */
export interface Job {
  id: string;
  accountId: string;
  apiKeyId: string;
  apiVersion: string;
  kind: JobKind;
  state: 'pending' | 'processing';
  location: string | null;
  spoolKey: string | null;
  /** A small upload's content, held in the job itself instead of the spool (spoolKey null). */
  content?: Buffer | null;
  metadata: Record<string, string>;
  callback: string | null;
  /** Attempts so far, the running one included; attempts cut short by an engine outage do not count. */
  attempts: number;
  /** When the job may be claimed: due time while pending, end of the lease while processing. */
  runAfter: string;
  creationDate: string;
  /** Set on v1.0 jobs only. */
  legacy?: LegacyJobOptions | null;
  /** Why the previous counted attempt failed; null when it recorded nothing (or there was none). */
  lastError?: string | null;
  /** Bytes held in the spool for the job (0 or absent for a fetch not downloaded yet): counted by the spool quota. */
  size?: number;
  /**
   * The job's credit was taken from the balance when it was accepted (JobRunner.submit sets it).
   * False for jobs accepted before that rule (migration 0010): they are charged when they finish.
   */
  creditHeld?: boolean;
  /** Set by the store: a fetch is downloaded first (its own slots), then scanned like an upload. */
  stage?: JobStage;
  /** The name the client gave the file, for its result (StoredFile.fileName). */
  fileName?: string | null;
  /** Set by a claim that looked them up (a small upload's, on PostgreSQL); absent: not looked up. */
  earlierVerdicts?: ClaimedVerdicts;
}

/** `download`: a fetch whose content is not in the spool yet; `scan`: spooled content. */
export type JobStage = 'download' | 'scan';

export type LegacyFormat = 'json' | 'xml' | 'yaml';

/** What a v1.0 job needs beyond a v2.x one. */
export interface LegacyJobOptions {
  /** Pinged with a bare GET when the job is done. */
  callback: string | null;
  /** Receives the v1.0 result by POST, in `format`, when the job is done. */
  postCallback: string | null;
  format: LegacyFormat;
  /** SHA-1 of uploaded content, known at submission; null for fetches. */
  checksum: string | null;
}

export interface TraceEvent {
  timestamp: string;
  message: string;
}

export interface CallbackDelivery {
  id: string;
  fileId: string;
  accountId: string;
  url: string;
  /** scheme://host:port of `url`: the receiver, for per-destination limits and backoff. */
  destination: string;
  /** POST the body (a result), or GET with no body (a v1.0 ping). */
  method: 'POST' | 'GET';
  /** v2.x: exactly the bytes of `GET /files/{id}` at completion; v1.0: the legacy result. */
  body: string;
  contentType: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  nextAttemptAt: string;
  lastError: string | null;
  creationDate: string;
  finishedDate: string | null;
}

export interface Token {
  id: string;
  accountId: string;
  apiKeyId: string;
  creationDate: string;
  expirationDate: string;
}

export interface User {
  accountId: string;
  email: string;
  creationDate: string;
  lastLoginDate: string | null;
}

/** What a watched bucket does with an object found to hold a threat, besides tagging it. */
export type ThreatAction = 'tag' | 'quarantine' | 'delete';

/** A watched bucket and prefix (issue 42): where its objects come from and what their verdicts do. */
export interface BucketSource {
  id: string;
  /** The operator's name for it: the CLI's, the webhook path's and the metrics' label. */
  name: string;
  accountId: string;
  /** The key its objects are scanned as: its categories, balance, limits and fairness apply. */
  apiKeyId: string;
  /** An S3-compatible server's URL (path-style addressing); '' for AWS itself. */
  endpoint: string;
  region: string;
  bucket: string;
  /** Only keys that start with it ('' for the whole bucket). */
  prefix: string;
  /** `default` (the AWS SDK's chain) or `env:NAME` (NAME_ACCESS_KEY_ID, NAME_SECRET_ACCESS_KEY). */
  credentials: string;
  /** The SQS queue its bucket's notifications arrive on; null: none. */
  queueUrl: string | null;
  /** SHA-256 (hex) of the webhook's bearer token; null: no webhook. */
  webhookTokenHash: string | null;
  onThreat: ThreatAction;
  /** Where `quarantine` moves an object: `bucket` or `bucket/prefix`. */
  quarantine: string | null;
  /** Each object's result is sent here (a v2.2 callback). */
  callback: string | null;
  /** Seconds: clean verdicts younger than this are scanned again when signatures change; null: the default. */
  rescanWindow: number | null;
  listing: BucketListing;
  creationDate: string;
}

/** A full listing's progress: requested, then running under a lease, resumable from `after`. */
export interface BucketListing {
  state: 'idle' | 'requested' | 'running';
  /** The last key announced: a listing resumes after it. */
  after: string | null;
  /** Objects listed so far in the current (or last) listing. */
  count: number;
  started: string | null;
  finished: string | null;
}
