import type { Generated } from 'kysely';

// Portable column types: booleans as 0/1 integers, dates as ISO 8601 text, JSON as text, so the
// same queries run on SQLite and PostgreSQL.

export interface AccountsTable {
  id: string;
  name: string;
  billing_email: string;
  subscription: string;
  balance: number;
  starting_balance: number;
  enforce_balance: number;
  creation_date: string;
  modification_date: string;
  callback_secret: string;
  /** 0: disabled, every key and token refused. */
  active: number;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  secret_hash: string;
  active: number;
  /** JSON array of strings. */
  tags: string;
  /** JSON array of detection categories. */
  detection_categories: string;
  creation_date: string;
  last_seen_date: string | null;
  /** Requests per second of the operator's limit for the key (a ceiling); null: the service default. */
  rate_limit: number | null;
  rate_burst: number | null;
  /** The account's own limit (the console), applied under the ceiling; null: none. */
  account_rate_limit: number | null;
  account_rate_burst: number | null;
  /** Seconds its results are kept (issue 41); null: the service's default for the key. */
  result_retention: number | null;
}

export interface FilesTable {
  id: string;
  account_id: string;
  api_key_id: string;
  checksum: string | null;
  sha256: string | null;
  content_length: number | null;
  content_type: string | null;
  /** JSON array of finding identifiers; null when the item has no verdict (see `error`). */
  findings: string | null;
  /** JSON object of string to string. */
  metadata: string;
  callback: string | null;
  error: string | null;
  creation_date: string;
  /**
   * The verdict cache's key for a result scanned now with a complete verdict (see
   * `processing/verdict-cache.ts`); null for a reused verdict, an error or a partial verdict.
   */
  verdict_key: string | null;
  /** The name the client gave the file (at most 255 bytes); console only, never in the API's result. */
  file_name: string | null;
  /**
   * A synchronous result's trace as recorded with it: a JSON array of [timestamp, message] pairs
   * (TraceRepository); later events are rows of trace_events. Null otherwise (migration 0027).
   */
  trace: string | null;
}

export interface JobsTable {
  id: string;
  account_id: string;
  api_key_id: string;
  api_version: string;
  /** 'upload' (content spooled in the data dir) or 'fetch' (content at `location`). */
  kind: string;
  /** 'pending' or 'processing' (claimed by a worker, which holds it until `run_after`). */
  state: string;
  location: string | null;
  spool_key: string | null;
  metadata: string;
  callback: string | null;
  attempts: number;
  /** When the job may be claimed: a pending job's due time, or the end of a processing job's lease. */
  run_after: string;
  creation_date: string;
  /** v1.0 jobs only: JSON of LegacyJobOptions. */
  legacy: string | null;
  /** Why the last counted attempt failed; null when it recorded nothing (it may have ended the process). */
  last_error: string | null;
  /** Bytes held in the spool for the job (0 for a fetch until its download is spooled). */
  size: number;
  /** 1: a credit was taken from the balance at acceptance; 0: accepted before migration 0010. */
  credit_held: number;
  /** 'download' (a fetch not yet in the spool) or 'scan' (spooled content). */
  stage: string;
  /** The name the client gave the file, for its result (see FilesTable). */
  file_name: string | null;
}

/** A small upload's content, kept in the store instead of the spool (its job's `spool_key` is null). */
export interface JobContentsTable {
  job_id: string;
  content: Buffer;
}

export interface TraceEventsTable {
  /** Assigned by the database, increasing in the order events are written (all files share it). */
  seq: Generated<number>;
  file_id: string;
  timestamp: string;
  message: string;
}

export interface CallbackDeliveriesTable {
  id: string;
  file_id: string;
  account_id: string;
  url: string;
  body: string;
  /** 'pending', 'delivered' or 'failed' (given up). */
  state: string;
  attempts: number;
  next_attempt_at: string;
  last_error: string | null;
  creation_date: string;
  finished_date: string | null;
  /** 'POST' (a result) or 'GET' (a v1.0 ping, no body). */
  method: string;
  content_type: string;
  /** scheme://host:port of `url`: deliveries are limited and held back per destination. */
  destination: string;
}

export interface TokensTable {
  id: string;
  account_id: string;
  /** The key that created it: the token acts with that key's categories and limits. */
  api_key_id: string;
  creation_date: string;
  expiration_date: string;
}

export interface UsersTable {
  account_id: string;
  email: string;
  creation_date: string;
  last_login_date: string | null;
  /** scrypt hash of the console password; null: the user cannot sign in (see migration 0016). */
  password_hash: string | null;
  /** 1: an operator, who also sees every account and the operations page. */
  operator: Generated<number>;
}

/** A console session: the SHA-256 of its cookie's secret (see migration 0016). */
export interface ConsoleSessionsTable {
  id_hash: string;
  account_id: string;
  email: string;
  creation_date: string;
  /** Milliseconds since the epoch (bigint: PostgreSQL returns a string). */
  expires_at: number | string;
  last_seen_at: number | string;
}

export interface RateBucketsTable {
  name: string;
  tokens: number;
  /** Milliseconds since the epoch. */
  updated_at: number;
  rate: number;
  burst: number;
}

/** Versions Assay sets itself, part of the verdict cache's key (see migration 0015). */
export interface EngineVersionsTable {
  name: string;
  version: string;
  modification_date: string;
}

/** A process's latest heartbeat (see migration 0017); times in milliseconds since the epoch. */
export interface NodeHeartbeatsTable {
  id: string;
  host: string;
  pid: number;
  role: string;
  version: string;
  clamd_version: string | null;
  signatures_version: number | null;
  signatures_date: string | null;
  own_signatures_version: string;
  databases_version: string | null;
  running_jobs: number | null;
  /** bigint: PostgreSQL returns a string. */
  started_at: number | string;
  last_seen_at: number | string;
}

/** A lane's circuit (see migration 0020); times in milliseconds since the epoch. */
export interface CallbackLanesTable {
  account_id: string;
  destination: string;
  failures: Generated<number>;
  opens: Generated<number>;
  /** bigint: PostgreSQL returns a string. */
  open_until: Generated<number | string>;
  last_used: number | string;
}

/** A callback delivery in flight, until its lease ends (see migration 0020). */
export interface CallbackAdmissionsTable {
  delivery_id: string;
  account_id: string;
  destination: string;
  /** Milliseconds since the epoch; bigint: PostgreSQL returns a string. */
  lease_until: number | string;
}

/** A watched bucket (see migration 0026); times in milliseconds since the epoch are bigint. */
export interface BucketSourcesTable {
  id: string;
  name: string;
  account_id: string;
  api_key_id: string;
  endpoint: string;
  region: string;
  bucket: string;
  prefix: string;
  credentials: string;
  queue_url: string | null;
  webhook_token_hash: string | null;
  on_threat: string;
  quarantine: string | null;
  callback: string | null;
  rescan_window: number | string | null;
  listing: Generated<string>;
  list_after: string | null;
  list_count: Generated<number | string>;
  list_started: string | null;
  list_finished: string | null;
  list_lease_until: Generated<number | string>;
  creation_date: string;
}

/** An object of a watched bucket, its scan in flight and its latest verdict (see migration 0026). */
export interface BucketObjectsTable {
  source_id: string;
  object_key: string;
  etag: string | null;
  version_id: string | null;
  size: number | string | null;
  job_id: string | null;
  result_id: string | null;
  status: string | null;
  signatures: string | null;
  scanned_at: string | null;
  write_due: number | string | null;
  write_attempts: Generated<number>;
  announced_at: string;
}

export interface Database {
  accounts: AccountsTable;
  api_keys: ApiKeysTable;
  files: FilesTable;
  jobs: JobsTable;
  job_contents: JobContentsTable;
  trace_events: TraceEventsTable;
  callback_deliveries: CallbackDeliveriesTable;
  tokens: TokensTable;
  users: UsersTable;
  console_sessions: ConsoleSessionsTable;
  rate_buckets: RateBucketsTable;
  engine_versions: EngineVersionsTable;
  node_heartbeats: NodeHeartbeatsTable;
  callback_lanes: CallbackLanesTable;
  callback_admissions: CallbackAdmissionsTable;
  bucket_sources: BucketSourcesTable;
  bucket_objects: BucketObjectsTable;
}
