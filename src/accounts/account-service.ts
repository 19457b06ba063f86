import { randomBytes } from 'node:crypto';
import {
  type Account,
  type ApiKey,
  DETECTION_CATEGORIES,
  type DetectionCategory,
} from '../store/records.js';
import type { Store } from '../store/store.js';
import {
  hashSecret,
  newId,
  newSecret,
  secretMatches,
  secretMatchesUnknownKey,
} from './credentials.js';

/** Who a request acts as, once its credentials are checked. */
export interface Principal {
  accountId: string;
  keyId: string;
  detectionCategories: DetectionCategory[];
}

export interface CreatedKey {
  key: ApiKey;
  /** Shown once; only its hash is stored. */
  secret: string;
}

function now(): string {
  return new Date().toISOString();
}

/** Account date fields have second precision (YYYY-MM-DDTHH:MM:SSZ). */
function nowToSecond(): string {
  return `${new Date().toISOString().slice(0, 19)}Z`;
}

export class AccountService {
  constructor(private readonly store: Store) {}

  async createAccount(input: {
    name: string;
    billingEmail?: string;
    subscription?: string;
    balance?: number;
    id?: string;
  }): Promise<Account> {
    const date = nowToSecond();
    const balance = input.balance ?? 0;
    const account: Account = {
      id: input.id ?? newId(),
      name: input.name,
      billingEmail: input.billingEmail ?? '',
      subscription: input.subscription ?? '',
      balance,
      startingBalance: balance,
      enforceBalance: false,
      creationDate: date,
      modificationDate: date,
      callbackSecret: randomBytes(32).toString('hex'),
    };
    await this.store.accounts.insert(account);
    return account;
  }

  async createKey(
    accountId: string,
    options: {
      id?: string;
      secret?: string;
      tags?: string[];
      categories?: DetectionCategory[];
    } = {},
  ): Promise<CreatedKey> {
    if ((await this.store.accounts.find(accountId)) === null) {
      throw new Error(`no account ${accountId}`);
    }
    const secret = options.secret ?? newSecret();
    const key: ApiKey = {
      id: options.id ?? newId(),
      accountId,
      secretHash: hashSecret(secret),
      active: true,
      tags: options.tags ?? [],
      detectionCategories: options.categories ?? [...DETECTION_CATEGORIES],
      creationDate: now(),
      lastSeenDate: null,
    };
    await this.store.apiKeys.insert(key);
    return { key, secret };
  }

  /**
   * Creates the development account and key of ASSAY_BOOTSTRAP_CREDENTIALS unless the key exists.
   * An existing key keeps its secret: changing the setting never silently rotates credentials.
   */
  async ensureBootstrapKey(keyId: string, secret: string): Promise<'created' | 'exists'> {
    if ((await this.store.apiKeys.find(keyId)) !== null) return 'exists';
    const account = await this.createAccount({ name: 'Bootstrap account', subscription: 'local' });
    await this.createKey(account.id, { id: keyId, secret });
    return 'created';
  }

  /** Checks Basic credentials in constant time; null for unknown, wrong or disabled keys. */
  async authenticate(keyId: string, secret: string): Promise<Principal | null> {
    const key = await this.store.apiKeys.find(keyId);
    if (key === null) return secretMatchesUnknownKey(secret) || null;
    if (!secretMatches(secret, key.secretHash) || !key.active) return null;
    return {
      accountId: key.accountId,
      keyId: key.id,
      detectionCategories: key.detectionCategories,
    };
  }
}
