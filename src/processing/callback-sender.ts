import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { newCallbackSecret } from '../accounts/credentials.js';
import type { CallbackDelivery } from '../domain/records.js';
import {
  OutboundError,
  type OutboundOptions,
  OutboundRefusedError,
  pingUrl,
  postBody,
} from '../outbound/guarded-http.js';
import type { Store } from '../store/store.js';
import type { AttemptOutcome } from './callback-destinations.js';

export const SIGNATURE_HEADER = 'x-assay-signature';

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the account's callback secret: the
 * receiver recomputes it, compares in constant time and rejects old timestamps (replays).
 */
export function signCallback(secret: string, body: string, timestamp: number): string {
  // An empty key would let anyone forge the signature: never sign with one.
  if (secret === '') throw new Error('refusing to sign a callback with an empty secret');
  const mac = createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
  return `t=${timestamp},v1=${mac}`;
}

/** What one attempt came to. */
export type Attempted =
  | { kind: 'delivered'; status: number }
  /** Retried later; `outcome` says whether it counts against the destination. */
  | { kind: 'failed'; failure: string; outcome: AttemptOutcome }
  /** Can never be sent: given up at once. */
  | { kind: 'undeliverable'; failure: string };

/** One attempt at a callback: signed with its account's secret, sent through the SSRF guard. */
export class CallbackSender {
  constructor(
    private readonly store: Store,
    private readonly outbound: OutboundOptions,
    private readonly logger: Logger,
  ) {}

  async send(delivery: CallbackDelivery): Promise<Attempted> {
    try {
      const secret = await this.signingSecret(delivery.accountId);
      if (secret === null) {
        return { kind: 'undeliverable', failure: 'not sent: its account no longer exists' };
      }
      const timestamp = Math.floor(Date.now() / 1000);
      const headers = {
        [SIGNATURE_HEADER]: signCallback(secret, delivery.body, timestamp),
        'x-assay-delivery': delivery.id,
        'x-assay-attempt': String(delivery.attempts),
      };
      // A v1.0 ping is a bare GET; its signature covers the empty body.
      const { status } =
        delivery.method === 'GET'
          ? await pingUrl(delivery.url, headers, this.outbound)
          : await postBody(
              delivery.url,
              Buffer.from(delivery.body),
              { 'content-type': delivery.contentType, ...headers },
              this.outbound,
            );
      if (status >= 200 && status < 300) return { kind: 'delivered', status };
      return { kind: 'failed', failure: `HTTP ${status}`, outcome: 'failed' };
    } catch (error) {
      // A refusal by the address policy cannot change while the service runs: given up at once,
      // and it costs the destination nothing.
      if (error instanceof OutboundRefusedError)
        return { kind: 'undeliverable', failure: error.message };
      if (error instanceof OutboundError)
        return { kind: 'failed', failure: error.message, outcome: 'failed' };
      this.logger.error({ err: error, delivery: delivery.id }, 'callback attempt failed');
      return { kind: 'failed', failure: 'not sent: internal error', outcome: 'neutral' };
    }
  }

  /**
   * The account's callback secret; null when the account is gone. An account without one (an
   * empty secret would let anyone forge the signature) gets a new one, stored before it is used.
   */
  private async signingSecret(accountId: string): Promise<string | null> {
    const account = await this.store.accounts.find(accountId);
    if (account === null) return null;
    if (account.callbackSecret !== '') return account.callbackSecret;
    const secret = await this.store.accounts.fillEmptyCallbackSecret(
      accountId,
      newCallbackSecret(),
    );
    this.logger.warn(
      { account: accountId },
      'the account had no callback secret; a new one now signs its callbacks (see assay admin account show)',
    );
    return secret === '' ? null : secret;
  }
}
