import { type Command, InvalidArgumentError } from 'commander';
import { category, collect, print, withStore } from './admin-support.js';

function rate(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value)) throw new InvalidArgumentError('expected a number >= 0');
  return Number(value);
}

/** Seconds, up to 100 years. */
function seconds(value: string): number {
  if (!/^\d{1,10}$/.test(value) || Number(value) > 100 * 365 * 86_400) {
    throw new InvalidArgumentError('expected a whole number of seconds (0: for good)');
  }
  return Number(value);
}

function burst(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new InvalidArgumentError('expected a whole number >= 1');
  }
  return Number(value);
}

/** `assay admin key …` and `assay admin token …`. */
export function registerKeyCommands(admin: Command): void {
  const key = admin.command('key').description('API keys');
  key
    .command('create')
    .description('create an API key; its secret is printed once and only its hash is kept')
    .requiredOption('--account <id>', 'account id')
    .option('--tag <tag>', 'free label (repeatable)', collect, [])
    .option(
      '--category <category>',
      'detection category to enable (repeatable; default: all)',
      category,
      [],
    )
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (_store, accounts) => {
        const { key: created, secret } = await accounts.createKey(options.account, {
          tags: options.tag,
          categories: options.category.length > 0 ? options.category : undefined,
        });
        print(
          options.json,
          { key: created.id, secret },
          `key:    ${created.id}\nsecret: ${secret}\n(the secret is shown only now: store it safely)`,
        );
      });
    });

  key
    .command('list')
    .description('list API keys (never their secrets)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (store) => {
        const keys = (await store.apiKeys.list(options.account)).map(
          ({ secretHash: _hidden, ...rest }) => rest,
        );
        const text = keys
          .map(
            (k) =>
              `${k.id}  account=${k.accountId}  ${k.active ? 'active' : 'disabled'}  ` +
              `categories=${k.detectionCategories.join(',') || '(none)'}  ` +
              `rate=${k.rateLimit === null ? 'default' : `${k.rateLimit.rate}/s burst ${k.rateLimit.burst}`}` +
              (k.accountRateLimit === null
                ? ''
                : `  account's own rate=${k.accountRateLimit.rate}/s burst ${k.accountRateLimit.burst}`),
          )
          .join('\n');
        print(options.json, keys, text);
      });
    });

  for (const [name, active] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    key
      .command(`${name} <key>`)
      .description(
        `${name} an API key (a disabled key gets 401${active ? '' : '; its tokens are deleted'})`,
      )
      .action(async (id: string) => {
        await withStore(async (_store, accounts) => {
          const outcome = await accounts.setKeyActive(id, active);
          if (outcome === null) throw new InvalidArgumentError(`no API key ${id}`);
          const ended = active ? '' : `; ${outcome.tokensEnded} of its tokens ended`;
          console.log(`${id} ${name}d${ended}`);
        });
      });
  }

  key
    .command('update <key>')
    .description("replace a key's tags, detection categories, rate limit or result retention")
    .option('--tag <tag>', 'free label (repeatable; replaces the tags)', collect, [])
    .option('--clear-tags', 'remove every tag')
    .option(
      '--category <category>',
      'detection category (repeatable; replaces the categories)',
      category,
      [],
    )
    .option(
      '--rate-limit <per-second>',
      "the key's requests per second (0: none); the account can lower it in the console, not raise it",
      rate,
    )
    .option(
      '--rate-burst <requests>',
      'requests at once (default: twice the rate, at least 1)',
      burst,
    )
    .option('--default-rate-limit', 'return the key to ASSAY_RATE_LIMIT and ASSAY_RATE_BURST')
    .option(
      '--result-retention <seconds>',
      "seconds the key's results are kept (0: for good); older ones are deleted",
      seconds,
    )
    .option(
      '--default-result-retention',
      'return the key to ASSAY_RESULT_RETENTION (ASSAY_ICAP_RESULT_RETENTION for an ICAP service)',
    )
    .action(async (id: string, options) => {
      await withStore(async (store) => {
        const tags = options.clearTags ? [] : options.tag.length > 0 ? options.tag : undefined;
        const categories = options.category.length > 0 ? options.category : undefined;
        if (options.rateBurst !== undefined && options.rateLimit === undefined) {
          throw new InvalidArgumentError('--rate-burst needs --rate-limit');
        }
        if (options.defaultRateLimit && options.rateLimit !== undefined) {
          throw new InvalidArgumentError('--default-rate-limit contradicts --rate-limit');
        }
        const rateLimit = options.defaultRateLimit
          ? null
          : options.rateLimit === undefined
            ? undefined
            : {
                rate: options.rateLimit,
                burst: options.rateBurst ?? Math.max(1, Math.ceil(options.rateLimit * 2)),
              };
        if (options.defaultResultRetention && options.resultRetention !== undefined) {
          throw new InvalidArgumentError(
            '--default-result-retention contradicts --result-retention',
          );
        }
        const resultRetention = options.defaultResultRetention
          ? null
          : (options.resultRetention as number | undefined);
        const changes = { tags, detectionCategories: categories, rateLimit, resultRetention };
        if (!(await store.apiKeys.update(id, changes))) {
          throw new InvalidArgumentError(`no API key ${id}`);
        }
        console.log(`${id} updated`);
      });
    });

  const token = admin.command('token').description('temporary tokens');
  token
    .command('list')
    .description('list tokens, with their expiration')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (store) => {
        const tokens = await store.tokens.list(options.account);
        const text = tokens
          .map(
            (t) =>
              `${t.id}  account=${t.accountId}  key=${t.apiKeyId}  expires ${t.expirationDate}`,
          )
          .join('\n');
        print(options.json, tokens, text);
      });
    });
  token
    .command('revoke <token>')
    .description('delete a token now (it gets 401 from then on)')
    .action(async (id: string) => {
      await withStore(async (store) => {
        const found = await store.tokens.find(id);
        if (found === null || !(await store.tokens.delete(found.accountId, id))) {
          throw new InvalidArgumentError(`no token ${id}`);
        }
        console.log(`${id} revoked`);
      });
    });
}
