import type { DeliveryState, DeliverySummary } from '../store/callback-outbox.js';
import type { Store } from '../store/store.js';

export type { DeliveryState, DeliverySummary } from '../store/callback-outbox.js';

export const CALLBACKS_PER_PAGE = 50;
/** The list's order: what needs attention first. */
export const CALLBACK_STATE_ORDER: readonly DeliveryState[] = ['failed', 'pending', 'delivered'];

/** Where a page starts: after this delivery, in the list's order. */
export interface CallbackCursor {
  state: DeliveryState;
  creationDate: string;
  id: string;
}

export interface CallbackPage {
  deliveries: DeliverySummary[];
  next: CallbackCursor | null;
}

/** `due`: it is tried at once; `delivered`: nothing to retry; `missing`: not the account's. */
export type RetryOutcome = 'due' | 'delivered' | 'missing';

const DELIVERY_ID = /^[0-9A-Za-z-]{1,64}$/;
const CURSOR_DATE = /^[0-9][0-9T:.+Z-]{9,39}$/;

export function isDeliveryId(text: string): boolean {
  return DELIVERY_ID.test(text);
}

/** A cursor as a link carries it: `<state>~<date>~<id>`. */
export function callbackCursorText(cursor: CallbackCursor): string {
  return `${cursor.state}~${cursor.creationDate}~${cursor.id}`;
}

/** The cursor a link carried; null when it is not one. */
export function parseCallbackCursor(text: string): CallbackCursor | null {
  const parts = text.split('~');
  if (parts.length !== 3) return null;
  const [state = '', creationDate = '', id = ''] = parts;
  const known = CALLBACK_STATE_ORDER.find((candidate) => candidate === state);
  if (known === undefined || !CURSOR_DATE.test(creationDate) || !DELIVERY_ID.test(id)) return null;
  return { state: known, creationDate, id };
}

/** An account's callback deliveries for the console: listed a page at a time, retried now. */
export class CallbackBrowser {
  /** @param wake tells this process's dispatcher that a delivery is due (others poll). */
  constructor(
    private readonly store: Store,
    private readonly wake: () => void = () => {},
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * A page of the account's deliveries: failed first, then pending, then delivered, newest first
   * within each. One index range per state, read only as far as the page needs.
   */
  async page(accountId: string, before: CallbackCursor | null): Promise<CallbackPage> {
    const wanted = CALLBACKS_PER_PAGE + 1;
    const found: DeliverySummary[] = [];
    const first = before === null ? 0 : CALLBACK_STATE_ORDER.indexOf(before.state);
    for (const [index, state] of CALLBACK_STATE_ORDER.entries()) {
      if (index < first || found.length >= wanted) continue;
      const after = before !== null && index === first ? before : null;
      found.push(
        ...(await this.store.callbacks.listForAccount(
          accountId,
          state,
          after,
          wanted - found.length,
        )),
      );
    }
    const deliveries = found.slice(0, CALLBACKS_PER_PAGE);
    const last = deliveries.at(-1);
    const next =
      found.length > CALLBACKS_PER_PAGE && last !== undefined
        ? { state: last.state, creationDate: last.creationDate, id: last.id }
        : null;
    return { deliveries, next };
  }

  /**
   * Makes a failed or waiting delivery due now, with a line in its file's trace. A failed one is
   * tried once more, then given up again if it fails and is older than the maximum age; a waiting
   * one keeps its retries. An attempt under way in another process may then run twice (callbacks
   * are delivered at least once: receivers already tell repeats by the delivery id).
   */
  async retryNow(accountId: string, id: string): Promise<RetryOutcome> {
    const at = new Date(this.clock()).toISOString();
    const due = await this.store.transaction(async (store) => {
      const made = await store.callbacks.makeDue(accountId, id, at);
      if (made !== null) {
        await store.trace.append(
          made.fileId,
          `callback to ${made.destination}: retry requested in the console`,
          at,
        );
      }
      return made;
    });
    if (due !== null) {
      this.wake();
      return 'due';
    }
    return (await this.store.callbacks.findForAccount(accountId, id)) === null
      ? 'missing'
      : 'delivered';
  }
}
