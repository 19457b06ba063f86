/** What operators see of the whole service (the console's accounts and operations pages). */

/** An account in the operators' list: the account and how many keys it has. */
export interface AccountSummary {
  id: string;
  name: string;
  active: boolean;
  balance: number;
  enforceBalance: boolean;
  creationDate: string;
  keyCount: number;
}

/** One Assay process as its last heartbeat described it; times in milliseconds since the epoch. */
export interface NodeHeartbeat {
  /** Random per process: a restarted process is a new node. */
  id: string;
  host: string;
  pid: number;
  role: string;
  /** Assay's version. */
  version: string;
  /** clamd's engine version; null while it does not answer. */
  clamdVersion: string | null;
  /** The official daily database's version and date, when loaded. */
  signaturesVersion: number | null;
  signaturesDate: string | null;
  ownSignaturesVersion: string;
  /** The digest of every database clamd has loaded; null while it loads or does not answer. */
  databasesVersion: string | null;
  /** Jobs the process is running; null for one that runs none (role api). */
  runningJobs: number | null;
  startedAt: number;
  lastSeenAt: number;
}

/** A result that ended in an error (no verdict). */
export interface ResultError {
  id: string;
  accountId: string;
  error: string;
  creationDate: string;
}

/** A callback whose last attempt failed: still retrying (pending) or given up (failed). */
export interface CallbackFailure {
  id: string;
  fileId: string;
  accountId: string;
  destination: string;
  state: string;
  attempts: number;
  lastError: string;
  creationDate: string;
  nextAttemptAt: string;
}
