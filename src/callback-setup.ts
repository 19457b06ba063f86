import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { OutboundOptions } from './outbound/guarded-http.js';
import {
  CALLBACK_LEASE_MS,
  CallbackDispatcher,
  type CallbackDispatcherOptions,
} from './processing/callback-dispatcher.js';
import { SharedDestinationGate } from './processing/shared-destination-gate.js';
import type { WorkDelivery } from './processing/work-delivery.js';
import type { Store } from './store/store.js';

/** Each callback attempt's connect and whole-request limits. */
const CALLBACK_CONNECT_TIMEOUT_MS = 5_000;
const CALLBACK_TOTAL_TIMEOUT_MS = 15_000;

/**
 * The callback dispatcher as the settings ask: its process-wide and per-account caps, and per
 * destination either in this process or, where other processes deliver from the same store
 * (PostgreSQL, `--processes`), in the store.
 */
export function callbackDispatcher(
  config: Config,
  store: Store,
  parts: {
    outbound: Pick<OutboundOptions, 'policy' | 'userAgent' | 'resolve'>;
    events: CallbackDispatcherOptions['events'];
    sharedByProcesses: boolean;
    logger: Logger;
    dispatch: WorkDelivery | null;
  },
): CallbackDispatcher {
  const caps = {
    concurrency: config.callbackDestinationConcurrency,
    accountConcurrency: config.accountCallbackConcurrency,
    retryBaseMs: config.callbackRetryBaseMs,
  };
  return new CallbackDispatcher(
    store,
    {
      outbound: {
        ...parts.outbound,
        connectTimeoutMs: CALLBACK_CONNECT_TIMEOUT_MS,
        totalTimeoutMs: CALLBACK_TOTAL_TIMEOUT_MS,
      },
      concurrency: config.callbackConcurrency,
      accountConcurrency: config.accountCallbackConcurrency,
      destinationConcurrency: config.callbackDestinationConcurrency,
      retryBaseMs: config.callbackRetryBaseMs,
      maxAgeMs: config.callbackMaxAgeMs,
      events: parts.events,
      // Other processes may deliver from the store too: the callback caps are the store's.
      destinations: parts.sharedByProcesses
        ? new SharedDestinationGate(store, caps, CALLBACK_LEASE_MS)
        : undefined,
    },
    parts.logger,
    parts.dispatch ?? undefined,
  );
}
