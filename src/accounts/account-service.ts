import { isUniqueViolation } from '../domain/failures.js';
import type { AccountSummary } from '../domain/operations.js';
import {
  type Account,
  type AccountErasure,
  type ApiKey,
  DETECTION_CATEGORIES,
  type DetectionCategory,
  type KeyRateLimit,
  type Token,
  type User,
} from '../domain/records.js';
import type { Store } from '../store/store.js';
import { CredentialCache } from './credential-cache.js';
import {
  hashSecret,
  newCallbackSecret,
  newId,
  newSecret,
  newTokenId,
  secretMatches,
  secretMatchesUnknownKey,
} from './credentials.js';

/** Who a request acts as, once its credentials are checked. */
export interface Principal {
  accountId: string;
  /** The API key, or for a token the key that created it (its categories and limits apply). */
  keyId: string;
  /** Set when a temporary token authenticated: tokens may process and read, not administer. */
  tokenId: string | null;
  detectionCategories: DetectionCategory[];
  /** The account enforces its balance and has none left: submissions are refused. */
  balanceExhausted: boolean;
  /** The account enforces its balance: a sync item's credit is taken before its body is read. */
  balanceEnforced: boolean;
  /** The operator's limit for the key (its ceiling); null: the service default. */
  rateLimit: KeyRateLimit | null;
  /** The account's own limit for the key, applied under the ceiling; null: none. */
  accountRateLimit: KeyRateLimit | null;
}

/** Token lifetimes in seconds: default and bounds. */
export const TOKEN_TIMEOUT = { default: 300, min: 1, max: 86_400 } as const;
/** A key's last_seen_date is written at most this often, not on every request. */
const LAST_SEEN_INTERVAL_MS = 60_000;
const TOKEN_ID = /^[0-9a-f]{32}$/;

export interface AccountDetails {
  account: Account;
  users: User[];
  keys: ApiKey[];
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
  private readonly lastSeenWritten = new Map<string, number>();
  private readonly keys: CredentialCache<ApiKey | null>;
  private readonly accounts: CredentialCache<Account | null>;
  private readonly tokens: CredentialCache<Token | null>;

  /**
   * @param cacheMs how long keys, accounts and tokens read to authenticate a request are reused
   * (ASSAY_CREDENTIAL_CACHE_MS; 0: not at all): a key disabled, a token deleted, an account
   * disabled or a limit changed by another process (or the admin CLI) takes effect within this
   * (and a request already past authentication); through this process, at once.
   */
  constructor(
    private readonly store: Store,
    cacheMs = 0,
  ) {
    this.keys = new CredentialCache(cacheMs);
    this.accounts = new CredentialCache(cacheMs);
    this.tokens = new CredentialCache(cacheMs);
  }

  private findKey(id: string): Promise<ApiKey | null> {
    return this.keys.get(id, () => this.store.apiKeys.find(id));
  }

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
      callbackSecret: newCallbackSecret(),
      active: true,
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
      rateLimit: null,
      accountRateLimit: null,
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
    try {
      // Account and key together: processes starting at once on one store may race here, and the
      // loser must leave no account without a key behind.
      await this.store.transaction(async (store) => {
        const accounts = new AccountService(store);
        const account = await accounts.createAccount({
          name: 'Bootstrap account',
          subscription: 'local',
        });
        await accounts.createKey(account.id, { id: keyId, secret });
      });
      return 'created';
    } catch (error) {
      if (isUniqueViolation(error) && (await this.store.apiKeys.find(keyId)) !== null) {
        return 'exists';
      }
      throw error;
    }
  }

  /**
   * Checks Basic credentials: a key and its secret (compared in constant time), or a token id
   * with an empty password. Null for unknown, wrong, disabled, expired or deleted credentials.
   */
  async authenticate(user: string, password: string): Promise<Principal | null> {
    // No key id holds a NUL (PostgreSQL could not even look one up): unknown on either store.
    if (user.includes('\u0000')) return secretMatchesUnknownKey(password) || null;
    if (password === '' && TOKEN_ID.test(user)) return this.authenticateToken(user);
    const key = await this.findKey(user);
    if (key === null) return secretMatchesUnknownKey(password) || null;
    if (!secretMatches(password, key.secretHash) || !key.active) return null;
    return this.principal(key, null);
  }

  private async authenticateToken(id: string): Promise<Principal | null> {
    const token = await this.tokens.get(id, () => this.store.tokens.find(id));
    if (token === null || Date.parse(token.expirationDate) <= Date.now()) return null;
    const key = await this.findKey(token.apiKeyId);
    // A disabled key refuses its tokens (disabling also deletes them: see setKeyActive).
    if (key === null || !key.active) return null;
    return this.principal(key, token.id);
  }

  private async principal(key: ApiKey, tokenId: string | null): Promise<Principal | null> {
    const account = await this.accounts.get(key.accountId, () =>
      this.store.accounts.find(key.accountId),
    );
    // A disabled account refuses every key and token of it, with the same 401 as a wrong secret.
    if (account === null || !account.active) return null;
    await this.noteSeen(key);
    return {
      accountId: key.accountId,
      keyId: key.id,
      tokenId,
      detectionCategories: key.detectionCategories,
      balanceExhausted: account.enforceBalance && account.balance <= 0,
      balanceEnforced: account.enforceBalance,
      rateLimit: key.rateLimit,
      accountRateLimit: key.accountRateLimit,
    };
  }

  private async noteSeen(key: ApiKey): Promise<void> {
    const now = Date.now();
    if (now - (this.lastSeenWritten.get(key.id) ?? 0) < LAST_SEEN_INTERVAL_MS) return;
    this.lastSeenWritten.set(key.id, now);
    await this.store.apiKeys.setLastSeen(key.id, nowToSecond());
  }

  /** Disables (every key and token of it gets 401, its data is kept) or enables an account. */
  async setAccountActive(id: string, active: boolean): Promise<boolean> {
    const changed = await this.store.accounts.setActive(id, active, nowToSecond());
    this.accounts.forget(id);
    return changed;
  }

  /**
   * Changes an account's name, billing e-mail, subscription, balance or whether it is enforced
   * (the admin CLI and the console's operators); false when there is no such account.
   */
  async updateAccount(
    id: string,
    changes: Partial<
      Pick<Account, 'name' | 'billingEmail' | 'subscription' | 'balance' | 'enforceBalance'>
    >,
  ): Promise<boolean> {
    const changed = await this.store.accounts.update(id, changes, nowToSecond());
    this.accounts.forget(id);
    return changed;
  }

  /**
   * A page of every account for operators, by name: at most `limit`, after the account
   * `afterId`, matching `search` (in the name, or the start of the id). `nextAfter`: the cursor
   * of the next page, null on the last.
   */
  async accountPage(options: {
    search: string;
    afterId: string | null;
    limit: number;
  }): Promise<{ accounts: AccountSummary[]; nextAfter: string | null }> {
    const found = await this.store.accounts.page({ ...options, limit: options.limit + 1 });
    const accounts = found.slice(0, options.limit);
    const nextAfter = found.length > options.limit ? (accounts.at(-1)?.id ?? null) : null;
    return { accounts, nextAfter };
  }

  /**
   * Erases the account and everything of it (keys, tokens, users, results, traces, pending jobs,
   * callbacks) in one transaction, then its spooled content. Null for an unknown account.
   * A job of it running in a service at that moment finds its row gone and records nothing.
   */
  async deleteAccount(
    id: string,
    removeSpooled: (key: string) => Promise<void>,
  ): Promise<AccountErasure | null> {
    const erasure = await this.store.transaction((store) => store.accounts.erase(id));
    this.forgetAll();
    if (erasure === null) return null;
    for (const key of [...erasure.spoolKeys, ...erasure.downloadKeys]) await removeSpooled(key);
    return erasure;
  }

  /**
   * Enables or disables a key. Disabling ends the key's tokens for good: a key disabled because it
   * leaked and enabled again later must not bring back the tokens made from it. Null for an
   * unknown key; else how many tokens were ended.
   */
  async setKeyActive(id: string, active: boolean): Promise<{ tokensEnded: number } | null> {
    const changed = await this.store.transaction(async (store) => {
      if (!(await store.apiKeys.setActive(id, active))) return null;
      return { tokensEnded: active ? 0 : await store.tokens.deleteForKey(id) };
    });
    this.keys.forget(id);
    this.tokens.clear();
    return changed;
  }

  /** A token for the principal's key, valid for `timeoutSeconds` from now to the millisecond. */
  async createToken(principal: Principal, timeoutSeconds: number): Promise<Token> {
    const created = Date.now();
    const token: Token = {
      id: newTokenId(),
      accountId: principal.accountId,
      apiKeyId: principal.keyId,
      creationDate: new Date(created).toISOString(),
      expirationDate: new Date(created + timeoutSeconds * 1000).toISOString(),
    };
    await this.store.tokens.insert(token);
    return token;
  }

  /** The token `id` of the account, or null (another account's token is not found either). */
  async findToken(accountId: string, id: string): Promise<Token | null> {
    const token = await this.store.tokens.find(id);
    return token === null || token.accountId !== accountId ? null : token;
  }

  /** Ends the token `id` of the account at once; false when it has no such token. */
  async revokeToken(accountId: string, id: string): Promise<boolean> {
    const deleted = await this.store.tokens.delete(accountId, id);
    this.tokens.forget(id);
    return deleted;
  }

  /** Reads every credential from the store again (after a change this process made). */
  forgetAll(): void {
    this.keys.clear();
    this.accounts.clear();
    this.tokens.clear();
  }

  /** The account with its users and keys (secrets are never part of a key record). */
  async overview(accountId: string): Promise<AccountDetails> {
    const details = await this.details(accountId);
    if (details === null) throw new Error(`authenticated account ${accountId} is missing`);
    return details;
  }

  /** Any account with its users and keys (for operators); null when there is no such account. */
  async details(accountId: string): Promise<AccountDetails | null> {
    const account = await this.store.accounts.find(accountId);
    if (account === null) return null;
    const [users, keys] = await Promise.all([
      this.store.users.list(accountId),
      this.store.apiKeys.list(accountId),
    ]);
    return { account, users, keys };
  }

  /** The account's key `id`, or null (another account's key is not found either). */
  async keyOf(accountId: string, id: string): Promise<ApiKey | null> {
    const key = await this.store.apiKeys.find(id);
    return key === null || key.accountId !== accountId ? null : key;
  }

  /** Enables or disables the account's key; null when it has no such key. */
  async setAccountKeyActive(
    accountId: string,
    id: string,
    active: boolean,
  ): Promise<{ tokensEnded: number } | null> {
    if ((await this.keyOf(accountId, id)) === null) return null;
    return this.setKeyActive(id, active);
  }

  /**
   * Replaces the account's key's tags, categories or its own rate limit (see accountRateLimit: the
   * operator's stays its ceiling); false when it has no such key.
   */
  async updateAccountKey(
    accountId: string,
    id: string,
    changes: {
      tags?: string[];
      detectionCategories?: DetectionCategory[];
      accountRateLimit?: KeyRateLimit | null;
    },
  ): Promise<boolean> {
    if ((await this.keyOf(accountId, id)) === null) return false;
    const updated = await this.store.apiKeys.update(id, changes);
    this.keys.forget(id);
    return updated;
  }

  /**
   * The principal of key `keyId` without its secret (an ICAP service acts as it); null when it or
   * its account is missing or disabled. Read through the credential cache.
   */
  async principalForKey(keyId: string): Promise<Principal | null> {
    const key = await this.findKey(keyId);
    if (key === null || !key.active) return null;
    return this.principal(key, null);
  }

  /**
   * The principal the account's key `keyId` acts as (a console user's test upload); null when the
   * account has no such key, or it or the account is disabled.
   */
  async principalForAccountKey(accountId: string, keyId: string): Promise<Principal | null> {
    const key = await this.keyOf(accountId, keyId);
    if (key === null || !key.active) return null;
    return this.principal(key, null);
  }
}
