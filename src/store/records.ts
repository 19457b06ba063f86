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
  /** The key's own rate limit; null: the service's default applies. */
  rateLimit: KeyRateLimit | null;
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
}

export type JobKind = 'upload' | 'fetch';

/** Work accepted with a 202 and not finished: its result does not exist yet. */
export interface Job {
  id: string;
  accountId: string;
  apiKeyId: string;
  apiVersion: string;
  kind: JobKind;
  state: 'pending' | 'processing';
  location: string | null;
  spoolPath: string | null;
  metadata: Record<string, string>;
  callback: string | null;
  attempts: number;
  runAfter: string;
  creationDate: string;
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
  /** Exactly the bytes of `GET /files/{id}` at completion. */
  body: string;
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
