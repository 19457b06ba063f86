import { createInterface } from 'node:readline/promises';
import { type Command, InvalidArgumentError } from 'commander';
import { loadConfig } from '../config.js';
import { openSpool } from '../spool/open-spool.js';
import { nonNegativeInteger, print, withStore } from './admin-support.js';

/** Asks on the terminal (or reads a line from standard input); true only for "yes". */
async function confirm(question: string): Promise<boolean> {
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  try {
    // Standard input closed without an answer (e.g. `< /dev/null`) is a no, not a hang.
    return await new Promise<boolean>((resolve) => {
      prompt.once('close', () => resolve(false));
      prompt.question(question).then(
        (answer) => resolve(answer.trim().toLowerCase() === 'yes'),
        () => resolve(false),
      );
    });
  } finally {
    prompt.close();
  }
}

/** `assay admin account …` and `assay admin user …`. */
export function registerAccountCommands(admin: Command): void {
  const account = admin.command('account').description('accounts');
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
        print(
          options.json,
          list,
          list.map((a) => `${a.id}  ${a.active ? 'active' : 'disabled'}  ${a.name}`).join('\n'),
        );
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
          `state:           ${found.active ? 'active' : 'disabled'}`,
          `billing email:   ${found.billingEmail}`,
          `subscription:    ${found.subscription}`,
          `balance:         ${found.balance}`,
          `created:         ${found.creationDate}`,
          `callback secret: ${found.callbackSecret}`,
        ].join('\n');
        print(options.json, found, text);
      });
    });

  account
    .command('update <id>')
    .description(
      'change an account: name, billing e-mail, subscription, balance and its enforcement',
    )
    .option('--name <name>', 'account name')
    .option('--billing-email <email>', 'billing e-mail')
    .option('--subscription <plan>', 'subscription plan name')
    .option('--balance <n>', 'current balance', nonNegativeInteger)
    .option('--enforce-balance', 'refuse submissions (403) once the balance is spent')
    .option('--no-enforce-balance', 'process whatever the balance')
    .action(async (id: string, options) => {
      await withStore(async (_store, accounts) => {
        const changed = await accounts.updateAccount(id, {
          name: options.name,
          billingEmail: options.billingEmail,
          subscription: options.subscription,
          balance: options.balance,
          enforceBalance: options.enforceBalance,
        });
        if (!changed) throw new InvalidArgumentError(`no account ${id}`);
        console.log(`${id} updated`);
      });
    });

  for (const [name, active] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    account
      .command(`${name} <id>`)
      .description(
        active
          ? 'enable an account again'
          : 'disable an account: every key and token of it gets 401 at once; its data is kept',
      )
      .action(async (id: string) => {
        await withStore(async (_store, accounts) => {
          if (!(await accounts.setAccountActive(id, active))) {
            throw new InvalidArgumentError(`no account ${id}`);
          }
          console.log(`${id} ${name}d`);
        });
      });
  }

  account
    .command('delete <id>')
    .description(
      'erase an account: its keys, tokens, users, results, traces, pending jobs, callbacks and spooled content',
    )
    .option('--yes', 'do not ask for confirmation')
    .action(async (id: string, options: { yes?: boolean }) => {
      await withStore(async (store, accounts) => {
        const found = await store.accounts.find(id);
        if (found === null) throw new InvalidArgumentError(`no account ${id}`);
        if (
          options.yes !== true &&
          !(await confirm(`Erase account ${id} (${found.name}) and all its data? Type yes: `))
        ) {
          console.log('nothing was deleted');
          process.exitCode = 1;
          return;
        }
        const spool = await openSpool(loadConfig());
        const erased = await accounts
          .deleteAccount(id, (key) => spool.remove(key))
          .finally(() => spool.close());
        if (erased === null) throw new InvalidArgumentError(`no account ${id}`);
        const { spoolKeys, downloadKeys: _downloads, ...counts } = erased;
        console.log(
          `${id} deleted: ${counts.keys} keys, ${counts.tokens} tokens, ${counts.users} users, ` +
            `${counts.results} results, ${counts.traceEvents} trace events, ${counts.jobs} pending jobs, ` +
            `${counts.callbacks} callbacks, ${spoolKeys.length} spooled files`,
        );
      });
    });
}
