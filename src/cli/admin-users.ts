import { type Command, InvalidArgumentError } from 'commander';
import { ConsoleAccess, ConsoleUserError } from '../accounts/console-access.js';
import { loadConfig } from '../config.js';
import type { Store } from '../store/store.js';
import { withStore } from './admin-support.js';
import { readNewPassword } from './password-input.js';

function consoleAccess(store: Store): ConsoleAccess {
  return new ConsoleAccess(store, loadConfig().console);
}

/** A refusal of the console's rules (a short password, a taken e-mail) as the CLI's usage error. */
async function asUsageError(work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (error) {
    if (error instanceof ConsoleUserError) throw new InvalidArgumentError(error.message);
    throw error;
  }
}

/** `assay admin user …`: users listed in the account resource, and who signs in to the console. */
export function registerUserCommands(admin: Command): void {
  const user = admin.command('user').description('users of an account (and of the console)');
  user
    .command('add')
    .description(
      'add a user (listed in the account resource); with a password (asked on a terminal, or --password-stdin) the user can sign in to the console',
    )
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--email <email>', 'e-mail address')
    .option('--operator', 'an operator: also sees every account and the operations page')
    .option('--password-stdin', 'read the password from the first line of standard input')
    .action(async (options) => {
      const password = await readNewPassword(options.passwordStdin === true);
      await withStore(async (store) => {
        await asUsageError(async () => {
          const { user: added, outcome } = await consoleAccess(store).addUser({
            accountId: options.account,
            email: options.email,
            password,
            operator: options.operator === true,
          });
          const role = added.operator ? ' as an operator' : '';
          console.log(
            password === null
              ? `${added.email} added to ${added.accountId} (no password: cannot sign in)`
              : outcome === 'added'
                ? `${added.email} added to ${added.accountId}${role}: can sign in to the console`
                : `${added.email} of ${added.accountId} given a password${role}: can sign in to the console`,
          );
        });
      });
    });
  user
    .command('remove')
    .description('remove a user from an account (and the console); ends their sessions')
    .requiredOption('--account <id>', 'account id')
    .requiredOption('--email <email>', 'e-mail address')
    .action(async (options) => {
      await withStore(async (store) => {
        if (!(await consoleAccess(store).removeUser(options.account, options.email))) {
          throw new InvalidArgumentError(`${options.account} has no user ${options.email}`);
        }
        console.log(`${options.email} removed from ${options.account}; their sessions are ended`);
      });
    });
  user
    .command('reset-password')
    .description(
      "set a console user's password (asked on a terminal, or --password-stdin); ends their sessions",
    )
    .requiredOption('--email <email>', 'e-mail address the user signs in with')
    .option('--password-stdin', 'read the password from the first line of standard input')
    .action(async (options) => {
      const password = await readNewPassword(options.passwordStdin === true);
      if (password === null) {
        throw new InvalidArgumentError('no terminal to ask on: give --password-stdin');
      }
      await withStore(async (store) => {
        await asUsageError(async () => {
          if (!(await consoleAccess(store).resetPassword(options.email, password))) {
            throw new InvalidArgumentError(`no console user ${options.email}`);
          }
          console.log(`password of ${options.email} set; their sessions are ended`);
        });
      });
    });
}
