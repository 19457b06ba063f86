import { type Command, InvalidArgumentError } from 'commander';
import { AccountService } from '../accounts/account-service.js';
import { loadConfig } from '../config.js';
import { openSqliteStore, type Store } from '../store/store.js';

function nonNegativeInteger(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('expected a whole number >= 0');
  return Number(value);
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** Opens the store of ASSAY_DATA_DIR for one command and always closes it. */
async function withStore(action: (store: Store, accounts: AccountService) => Promise<void>) {
  const store = await openSqliteStore(loadConfig().dataDir);
  try {
    await action(store, new AccountService(store));
  } finally {
    await store.close();
  }
}

function print(json: boolean, value: unknown, text: string): void {
  console.log(json ? JSON.stringify(value, null, 2) : text);
}

/** `assay admin …`: accounts and API keys, straight on the store of ASSAY_DATA_DIR. */
export function registerAdminCommands(program: Command): void {
  const admin = program
    .command('admin')
    .description('manage accounts and API keys in the store of ASSAY_DATA_DIR');
  const account = admin.command('account').description('accounts');
  const key = admin.command('key').description('API keys');

  account
    .command('create')
    .description('create an account and print its id')
    .requiredOption('--name <name>', 'account name')
    .option('--billing-email <email>', 'billing e-mail', '')
    .option('--subscription <plan>', 'subscription plan name', '')
    .option('--balance <n>', 'starting balance', nonNegativeInteger, 0)
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (_store, accounts) => {
        const created = await accounts.createAccount({
          name: options.name,
          billingEmail: options.billingEmail,
          subscription: options.subscription,
          balance: options.balance,
        });
        print(options.json, created, created.id);
      });
    });

  account
    .command('list')
    .description('list accounts')
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (store) => {
        // Callback secrets only with `account show`: a listing is for overviews.
        const list = (await store.accounts.list()).map(
          ({ callbackSecret: _hidden, ...rest }) => rest,
        );
        print(options.json, list, list.map((a) => `${a.id}  ${a.name}`).join('\n'));
      });
    });

  account
    .command('show <id>')
    .description('show an account, with the secret that signs its callbacks')
    .option('--json', 'print JSON')
    .action(async (id: string, options) => {
      await withStore(async (store) => {
        const found = await store.accounts.find(id);
        if (found === null) throw new InvalidArgumentError(`no account ${id}`);
        const text = [
          `id:              ${found.id}`,
          `name:            ${found.name}`,
          `billing email:   ${found.billingEmail}`,
          `subscription:    ${found.subscription}`,
          `balance:         ${found.balance}`,
          `created:         ${found.creationDate}`,
          `callback secret: ${found.callbackSecret}`,
        ].join('\n');
        print(options.json, found, text);
      });
    });

  key
    .command('create')
    .description('create an API key; its secret is printed once and only its hash is kept')
    .requiredOption('--account <id>', 'account id')
    .option('--tag <tag>', 'free label (repeatable)', collect, [])
    .option('--json', 'print JSON')
    .action(async (options) => {
      await withStore(async (_store, accounts) => {
        const { key: created, secret } = await accounts.createKey(options.account, {
          tags: options.tag,
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
          .map((k) => `${k.id}  account=${k.accountId}  ${k.active ? 'active' : 'disabled'}`)
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
      .description(`${name} an API key (a disabled key gets 401)`)
      .action(async (id: string) => {
        await withStore(async (store) => {
          if (!(await store.apiKeys.setActive(id, active))) {
            throw new InvalidArgumentError(`no API key ${id}`);
          }
          console.log(`${id} ${name}d`);
        });
      });
  }
}
