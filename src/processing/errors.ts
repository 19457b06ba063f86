/** Domain failures; the HTTP layer maps each to a status code in one place. */

export class EmptyContentError extends Error {
  constructor() {
    super('the content is empty: nothing to process');
  }
}

/** The account enforces its balance and has no credit left for the item: nothing was kept. */
export class BalanceSpentError extends Error {
  constructor() {
    super('the account has no balance left: nothing was processed');
  }
}

export class ContentTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the content exceeds the limit of ${limit} bytes`);
  }
}

/** An engine could not give a verdict; the content must not be reported clean. */
export class EngineUnavailableError extends Error {
  /** `notReached`: the content never reached the engine (down, restarting): not the item's doing. */
  constructor(
    readonly engine: string,
    readonly reason: string,
    readonly notReached = false,
  ) {
    super(`the ${engine} engine could not scan the content (${reason}); nothing was processed`);
  }
}

/**
 * The content cannot be examined as asked, and retrying will not change that: an engine could not
 * decide (a corrupt image, a document past its caps, a timeout), or no category is enabled. The
 * item gets an `error`, never findings.
 */
export class ContentNotExaminedError extends Error {}

/**
 * Accepting the content would take the bytes held for unfinished async work past a quota: the
 * service's (`total`, 507) or the account's (`account`, 429). Retrying later may succeed.
 */
export class SpoolQuotaExceededError extends Error {
  constructor(
    readonly scope: 'total' | 'account',
    limit: number,
  ) {
    super(
      scope === 'total'
        ? `the service holds ${limit} bytes of unfinished work at most and is full: retry later`
        : `this account may hold ${limit} bytes of unfinished work at most: retry once some of it is done`,
    );
  }
}
