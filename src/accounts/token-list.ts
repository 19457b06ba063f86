import type { Store } from '../store/store.js';
import type { AccountService } from './account-service.js';

export const TOKENS_PER_PAGE = 50;
/**
 * How much of a token's id the console shows, links and takes back: 48 of its 128 bits. The id
 * is the credential (Basic user, empty password), so no page, link or form carries all of it.
 */
export const TOKEN_PREFIX_LENGTH = 12;

/** A token as the console shows it: never its whole id. */
export interface ShownToken {
  prefix: string;
  apiKeyId: string;
  creationDate: string;
  expirationDate: string;
}

/** Where a page starts: after the token with this creation date and id prefix, newest first. */
export interface TokenCursor {
  creationDate: string;
  prefix: string;
}

export interface TokenPage {
  tokens: ShownToken[];
  next: TokenCursor | null;
}

/** `ambiguous`: more than one of the account's tokens starts with the prefix (left alone). */
export type RevokeOutcome = 'revoked' | 'missing' | 'ambiguous';

const PREFIX = new RegExp(`^[0-9a-f]{${TOKEN_PREFIX_LENGTH}}$`);
const CURSOR_DATE = /^[0-9][0-9T:.+Z-]{9,39}$/;

export function isTokenPrefix(text: string): boolean {
  return PREFIX.test(text);
}

/** A cursor as a link carries it: `<date>~<prefix>`. */
export function tokenCursorText(cursor: TokenCursor): string {
  return `${cursor.creationDate}~${cursor.prefix}`;
}

/** The cursor a link carried; null when it is not one. */
export function parseTokenCursor(text: string): TokenCursor | null {
  const parts = text.split('~');
  if (parts.length !== 2) return null;
  const [creationDate = '', prefix = ''] = parts;
  return CURSOR_DATE.test(creationDate) && PREFIX.test(prefix) ? { creationDate, prefix } : null;
}

/** An account's unexpired temporary tokens for the console: a page at a time, revoked by prefix. */
export class TokenList {
  constructor(
    private readonly store: Store,
    private readonly accounts: AccountService,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * A page of the account's unexpired tokens, newest first. The next page starts below the last
   * one's prefix: a token after it that shares its creation millisecond and all 48 bits of its
   * prefix would be left out (one chance in 2^48 for two tokens of one millisecond).
   */
  async page(accountId: string, before: TokenCursor | null): Promise<TokenPage> {
    const found = await this.store.tokens.pageForAccount(
      accountId,
      new Date(this.clock()).toISOString(),
      before === null ? null : { creationDate: before.creationDate, id: before.prefix },
      TOKENS_PER_PAGE + 1,
    );
    const tokens = found.slice(0, TOKENS_PER_PAGE).map((token) => ({
      prefix: token.id.slice(0, TOKEN_PREFIX_LENGTH),
      apiKeyId: token.apiKeyId,
      creationDate: token.creationDate,
      expirationDate: token.expirationDate,
    }));
    const last = tokens.at(-1);
    const next =
      found.length > TOKENS_PER_PAGE && last !== undefined
        ? { creationDate: last.creationDate, prefix: last.prefix }
        : null;
    return { tokens, next };
  }

  /** Ends the account's token whose id starts with `prefix`, if exactly one does. */
  async revoke(accountId: string, prefix: string): Promise<RevokeOutcome> {
    if (!isTokenPrefix(prefix)) return 'missing';
    const [token, another] = await this.store.tokens.findByPrefix(accountId, prefix, 2);
    if (token === undefined) return 'missing';
    if (another !== undefined) return 'ambiguous';
    return (await this.accounts.revokeToken(accountId, token.id)) ? 'revoked' : 'missing';
  }
}
